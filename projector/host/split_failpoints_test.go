//go:build failpoints

package host

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

// crashAtHit returns a failpoint that panics (crashSignal) at the nth call
// of name.
func crashAtHit(name string, n int) func(string) {
	return func(got string) {
		if got == name {
			if n--; n == 0 {
				panic(crashSignal{got})
			}
		}
	}
}

// TestSplitCommitCrash stops a split commit of 21 partitions at 10 a commit
// (Config.CommitPartitions: the split of 2,100 at ledger.MaxBatch, scaled
// down a hundredfold; TestSplitCommit runs at the real limit), three
// commits, between its commits and inside one: after its second commit is
// recorded, after its second is appended and not recorded, after its first
// is appended and not recorded. The commits before the stop are in the log, the rest
// of the changes are still uncommitted, and the next commit publishes exactly
// those: every file is in exactly one commit, and a fresh host converges.
func TestSplitCommitCrash(t *testing.T) {
	t.Parallel()
	const limit, parts, files = 10, 21, 2
	for _, tc := range []struct {
		failpoint string
		hit       int
		published int // commits in the log after the crash
		dirty     int // partitions still dirty after it
		more      int // commits the next commit publishes
	}{
		{"commit-after-persist", 2, 2, 1, 1},
		{"commit-after-append", 2, 2, 11, 1}, // the second commit is published, not recorded
		{"commit-after-append", 1, 1, 21, 2},
	} {
		t.Run(fmt.Sprintf("%s#%d", tc.failpoint, tc.hit), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			dir := t.TempDir()
			a := e.hostAt("a", dir)
			a.cfg.CommitPartitions = limit
			writeWide(t, a, parts, files, "v1")
			a.SetFailpoint(crashAtHit(tc.failpoint, tc.hit))
			if !crashed(func() { _, _ = a.Commit(ctx, CommitOptions{Message: "wide"}) }) {
				t.Fatalf("the commit did not reach %s #%d", tc.failpoint, tc.hit)
			}
			a.Close()
			if n := len(e.loggedCommits()); n != tc.published {
				t.Fatalf("after the crash the log holds %d commits, want %d", n, tc.published)
			}
			a = e.hostAt("a", dir)
			a.cfg.CommitPartitions = limit
			st := mustStatus(t, a)
			dirtyParts := map[string]bool{}
			for _, p := range st.Dirty {
				dirtyParts[ledger.PartitionKey(p)] = true
			}
			if len(dirtyParts) != tc.dirty || len(st.Dirty) != tc.dirty*files {
				t.Fatalf("after the crash %d paths of %d partitions are dirty, want %d of %d", len(st.Dirty), len(dirtyParts), tc.dirty*files, tc.dirty)
			}

			res := mustCommit(t, a, "rest")
			if len(res.Commits) != tc.more {
				t.Fatalf("the next commit published %d commits, want %d: %+v", len(res.Commits), tc.more, res.Commits)
			}
			logged := e.loggedCommits()
			if len(logged) != tc.published+tc.more {
				t.Fatalf("the log holds %d commits, want %d", len(logged), tc.published+tc.more)
			}
			in := map[string]int{}
			for _, c := range logged {
				for _, p := range c.paths {
					in[p]++
				}
			}
			for m := range parts {
				for f := range files {
					if n := in[wideFile(m, f)]; n != 1 {
						t.Fatalf("%s is in %d commits, want exactly 1", wideFile(m, f), n)
					}
				}
			}
			if len(in) != parts*files {
				t.Fatalf("the log holds %d paths, want %d", len(in), parts*files)
			}
			last := logged[len(logged)-1]
			if tc.more > 1 && last.message != fmt.Sprintf("rest (part %d of %d)", tc.more, tc.more) {
				t.Fatalf("the last commit's message is %q", last.message)
			}
			// A commit recorded before the crash moved the HWM; one that was
			// not, the next commit reads scoped (the HWM stays below it) as for
			// a single commit, and the next full sync moves the HWM to the head.
			if sa := mustStatus(t, a); len(sa.Dirty) != 0 || (tc.failpoint == "commit-after-persist" && sa.HWM != sa.Head) {
				t.Fatalf("writer after the next commit: hwm %d head %d, %d dirty", sa.HWM, sa.Head, len(sa.Dirty))
			}
			if sr := mustSync(t, a, SyncOptions{}); sr.Written != 0 {
				t.Fatalf("the writer's sync wrote %d files", sr.Written)
			}
			if sa := mustStatus(t, a); sa.HWM != sa.Head || len(sa.Dirty) != 0 {
				t.Fatalf("writer after a sync: hwm %d head %d, %d dirty", sa.HWM, sa.Head, len(sa.Dirty))
			}
			b := e.host("b")
			mustSync(t, b, SyncOptions{})
			if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
				t.Fatalf("caches differ (-a +b):\n%s", diff)
			}
			if sb := mustStatus(t, b); sb.HWM != sb.Head {
				t.Fatalf("fresh host: hwm %d head %d", sb.HWM, sb.Head)
			}
		})
	}
}

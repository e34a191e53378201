package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

// writeWide writes files files in each of parts partitions (data--t--mNNNN),
// their content tagged gen.
func writeWide(t *testing.T, h *Host, parts, files int, gen string) {
	t.Helper()
	for m := range parts {
		for f := range files {
			writeFile(t, h, wideFile(m, f), fmt.Sprintf("%s %d/%d", gen, m, f))
		}
	}
}

func wideFile(m, f int) string { return fmt.Sprintf("data/t/m%04d/d/%d/raw", m, f) }

// loggedCommit is one commit as the log holds it.
type loggedCommit struct {
	id, message string
	seqs        []ledger.Seq
	parts       []string // its events' partitions, in part order
	paths       []string
}

// loggedCommits reads the whole log, grouped into commits in seq order, and
// checks each is complete (all its Parts, at consecutive seqs: one atomic batch).
func (e *env) loggedCommits() []loggedCommit {
	e.t.Helper()
	var out []loggedCommit
	err := ledger.ReadCommits(context.Background(), e.log, 1, 0, func(recs []ledger.Record) error {
		c := loggedCommit{id: recs[0].Event.Commit, message: recs[0].Event.Message}
		for i, r := range recs {
			if r.Event.Parts != len(recs) || r.Event.Part != i+1 || (i > 0 && r.Seq != recs[i-1].Seq+1) {
				return fmt.Errorf("commit %s: part %d/%d at seq %d: not one whole atomic batch", c.id, r.Event.Part, r.Event.Parts, r.Seq)
			}
			ev := r.Event // a few small entries each: inline, no manifest
			c.seqs = append(c.seqs, r.Seq)
			c.parts = append(c.parts, ev.Partition)
			for _, en := range ev.Entries {
				c.paths = append(c.paths, en.Path)
			}
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestSplitCommit: a cold commit of 25 partitions, more than one commit
// holds (Config.CommitPartitions at 10: TestSplitCommitCLI splits 2,500 at
// the real limit, ledger.MaxBatch), is published as three commits of 10, 10
// and 5 partitions, in partition order, each one whole atomic batch,
// sharing the message; a fresh host syncs to the head with the same content,
// and a commit afterwards publishes nothing.
func TestSplitCommit(t *testing.T) {
	t.Parallel()
	const limit, parts, files = 10, 25, 3
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	a.cfg.CommitPartitions = limit
	writeWide(t, a, parts, files, "v1")
	res := mustCommit(t, a, "cold")
	if len(res.Commits) != 3 || res.Written != parts*files || len(res.Partitions) != parts || len(res.Seqs) != parts {
		t.Fatalf("commit of %d partitions: %d commits, %d files written, %d partitions, %d seqs; want 3, %d, %d, %d",
			parts, len(res.Commits), res.Written, len(res.Partitions), len(res.Seqs), parts*files, parts, parts)
	}
	if res.Commit != res.Commits[2].Commit || !slices.IsSorted(res.Partitions) || !slices.IsSorted(res.Paths) {
		t.Fatalf("result: commit %s, want the last one %s; partitions and paths sorted: %v %v",
			res.Commit, res.Commits[2].Commit, slices.IsSorted(res.Partitions), slices.IsSorted(res.Paths))
	}
	logged := e.loggedCommits()
	if len(logged) != 3 {
		t.Fatalf("the log holds %d commits, want 3", len(logged))
	}
	wantParts := []int{limit, limit, parts - 2*limit}
	var prev string
	for i, c := range logged {
		if c.id != res.Commits[i].Commit || !slices.Equal(c.seqs, res.Commits[i].Seqs) {
			t.Errorf("commit %d: the log has %s at %v, the result %s at %v", i+1, c.id, c.seqs, res.Commits[i].Commit, res.Commits[i].Seqs)
		}
		if len(c.parts) != wantParts[i] || res.Commits[i].Partitions != wantParts[i] || res.Commits[i].Written != wantParts[i]*files {
			t.Errorf("commit %d: %d partitions (result %+v), want %d", i+1, len(c.parts), res.Commits[i], wantParts[i])
		}
		if want := fmt.Sprintf("cold (part %d of 3)", i+1); c.message != want {
			t.Errorf("commit %d: message %q, want %q", i+1, c.message, want)
		}
		if !slices.IsSorted(c.parts) || c.parts[0] <= prev {
			t.Errorf("commit %d: partitions %s..%s after %s: not in partition order", i+1, c.parts[0], c.parts[len(c.parts)-1], prev)
		}
		prev = c.parts[len(c.parts)-1]
	}

	sr := mustSync(t, b, SyncOptions{})
	st := mustStatus(t, b)
	if sr.Written != parts*files || st.HWM != st.Head || st.Head != res.HWM {
		t.Fatalf("fresh host: wrote %d files, hwm %d head %d; the writer's hwm %d", sr.Written, st.HWM, st.Head, res.HWM)
	}
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ (-a +b):\n%s", diff)
	}
	if sa := mustStatus(t, a); sa.HWM != sa.Head || len(sa.Dirty) != 0 {
		t.Fatalf("writer: hwm %d head %d, dirty %d", sa.HWM, sa.Head, len(sa.Dirty))
	}
	if again := mustCommit(t, a, "again"); !again.Nothing || len(again.Commits) != 0 || again.HWM != res.HWM {
		t.Fatalf("commit after the split commit: %+v, want nothing at hwm %d", again, res.HWM)
	}
	if n := len(e.loggedCommits()); n != 3 {
		t.Fatalf("the no-op commit published: the log holds %d commits", n)
	}
}

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
			a.cfg.Failpoint = crashAtHit(tc.failpoint, tc.hit)
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

// TestSplitCommitConflict: another host commits to a partition of the
// second of three commits (21 partitions at 10 a commit, as in
// TestSplitCommitCrash) while the first is published. The first commit
// stays published; a change to another path of that partition is pulled and
// the commit goes on (as a single commit retries); a change to the same path
// stops it with a ConflictError naming it, the commits before it published,
// the rest still uncommitted.
func TestSplitCommitConflict(t *testing.T) {
	t.Parallel()
	const limit, parts = 10, 21
	for _, samePath := range []bool{false, true} {
		t.Run(fmt.Sprintf("same-path=%v", samePath), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			a, b := e.host("a"), e.host("b")
			a.cfg.CommitPartitions = limit
			writeWide(t, a, parts, 1, "base")
			mustCommit(t, a, "base")
			mustSync(t, b, SyncOptions{})
			writeWide(t, a, parts, 1, "a")
			target := wideFile(15, 0) // in the second commit
			other := wideFile(15, 7)
			if samePath {
				other = target
			}
			a.cfg.Failpoint = func(name string) {
				if name == "commit-after-persist" {
					a.cfg.Failpoint = func(string) {}
					writeFile(t, b, other, "b's")
					if r := mustCommit(t, b, "b"); len(r.Commits) != 1 {
						t.Errorf("b's commit: %+v", r)
					}
				}
			}
			res, err := a.Commit(ctx, CommitOptions{Message: "a"})
			if !samePath {
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Commits) != 3 || res.Pulled != 1 || res.Written != parts {
					t.Fatalf("commit: %d commits, pulled %d, wrote %d; want 3, 1, %d", len(res.Commits), res.Pulled, res.Written, parts)
				}
				if got, _ := readFile(t, a, other); got != "b's" {
					t.Fatalf("a holds %q at %s, want b's commit", got, other)
				}
				mustSync(t, b, SyncOptions{})
				if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
					t.Fatalf("caches differ (-a +b):\n%s", diff)
				}
				return
			}
			var ce *ConflictError
			var pe *PartialCommitError
			if !errors.As(err, &ce) || !slices.Equal(ce.Paths, []string{target}) || !errors.As(err, &pe) {
				t.Fatalf("commit = %v, want a ConflictError on %s after a partial commit", err, target)
			}
			if len(pe.Published) != 1 || len(res.Commits) != 1 || !strings.Contains(err.Error(), res.Commits[0].Commit) {
				t.Fatalf("published before the conflict: %+v (error %q), want the first commit", res.Commits, err)
			}
			st := mustStatus(t, a)
			dirtyParts := map[string]bool{}
			for _, p := range st.Dirty {
				dirtyParts[ledger.PartitionKey(p)] = true
			}
			if len(dirtyParts) != parts-limit {
				t.Fatalf("%d partitions dirty after the conflict, want %d", len(dirtyParts), parts-limit)
			}
		})
	}
}

// TestCommitPartitionsBound: Config.CommitPartitions defaults to, and never
// exceeds, ledger.MaxBatch, the most one atomic batch holds.
func TestCommitPartitionsBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for set, want := range map[int]int{0: ledger.MaxBatch, -1: ledger.MaxBatch, 10: 10, ledger.MaxBatch + 1: ledger.MaxBatch} {
		h, err := Open(Config{Cache: t.TempDir(), Host: "h", Log: e.log, Blobs: e.blobs, CommitPartitions: set})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.cfg.CommitPartitions; got != want {
			t.Errorf("CommitPartitions %d: in effect %d, want %d", set, got, want)
		}
		h.Close()
	}
}

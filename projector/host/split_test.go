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
			appends := 0
			a.cfg.Log = &hookedLog{CommitLog: a.cfg.Log, beforeAppend: func() {
				// b commits between a's first commit and its second.
				if appends++; appends == 2 {
					writeFile(t, b, other, "b's")
					if r := mustCommit(t, b, "b"); len(r.Commits) != 1 {
						t.Errorf("b's commit: %+v", r)
					}
				}
			}}
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

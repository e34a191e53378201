package host

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// takeFence stores a fence record of lock for host on e's log.
func (e *env) takeFence(lock, host string) ledger.Fence {
	e.t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	seq, err := e.log.TakeFence(context.Background(), ledger.FenceRecord{V: ledger.FormatVersion, Ledger: e.uuid, Lock: lock, ID: id, Host: host, At: time.Now()})
	if err != nil {
		e.t.Fatal(err)
	}
	return ledger.Fence{Lock: lock, Seq: seq}
}

// A commit under fences publishes while they hold, its HWM past its fence
// checks (the next sync's fast path holds); once another holder took a lock,
// the commit fails with ErrLockLost, is not retried, publishes nothing, and
// its files stay in the cache, uncommitted — even when a chain moved too.
// Another host's sync passes the fence records and checks.
func TestCommitUnderFences(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    func(t *testing.T) *env
	}{{"memledger", newEnv}, {"natsjs", newNATSEnv}} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e(t)
			ctx := context.Background()
			a, b := e.host("a"), e.host("b")
			lock, global := "data/m/x/.lock", ".datastore.lock"
			fa, ga := e.takeFence(lock, "a"), e.takeFence(global, "a")
			mustSync(t, a, SyncOptions{}) // past the fence records

			writeFile(t, a, "data/m/x/d/1/raw", "a1")
			writeFile(t, a, "data/m/y/d/1/raw", "y1")
			res, err := a.Commit(ctx, CommitOptions{Message: "under the lock", Fences: []ledger.Fence{fa, ga}})
			if err != nil {
				t.Fatalf("commit under fences that hold: %v", err)
			}
			st := mustStatus(t, a)
			if want := res.Seqs[len(res.Seqs)-1] + 2; st.HWM != want || st.Head != want || st.Behind != 0 {
				t.Fatalf("after a commit of %v under two fences: hwm %d, head %d; want both %d (its fence checks passed)", res.Seqs, st.HWM, st.Head, want)
			}
			if r := mustSync(t, a, SyncOptions{}); !r.UpToDate || r.HWM != st.HWM {
				t.Fatalf("sync after the own fenced commit: %+v", r)
			}
			mustSync(t, b, SyncOptions{})
			if got, _ := readFile(t, b, "data/m/x/d/1/raw"); got != "a1" {
				t.Fatalf("b after its sync: %q, want a's file", got)
			}

			// b takes the lock (a's expired), and publishes in a's partition.
			fb := e.takeFence(lock, "b")
			writeFile(t, b, "data/m/x/d/2/raw", "b2")
			if _, err := b.Commit(ctx, CommitOptions{Fences: []ledger.Fence{fb}}); err != nil {
				t.Fatal(err)
			}
			head := mustStatus(t, b).Head

			// a, resumed, commits under its lost fence: refused, nothing
			// stored, not retried, its files kept.
			writeFile(t, a, "data/m/x/d/2/raw", "a2")
			res, err = a.Commit(ctx, CommitOptions{Message: "after the lock passed", Fences: []ledger.Fence{fa, ga}})
			var le *ledger.LockLostError
			if !errors.As(err, &le) || !errors.Is(err, ledger.ErrLockLost) || errors.Is(err, ledger.ErrConflict) || errors.Is(err, ErrCommitConflict) {
				t.Fatalf("commit under a lost fence = %v, want a LockLostError alone", err)
			}
			if le.Lock != lock || le.Taker == nil || le.Taker.Host != "b" || len(res.Commits) != 0 || res.Attempts != 1 {
				t.Fatalf("lost lock %+v (taker %+v); result %+v: want lock %s taken by b, nothing published, one attempt", le, le.Taker, res, lock)
			}
			st = mustStatus(t, a)
			if st.Head != head || !slices.Contains(st.Dirty, "data/m/x/d/2/raw") {
				t.Fatalf("a after its refused commit: head %d (want %d), dirty %q (want its file)", st.Head, head, st.Dirty)
			}
			if got, _ := readFile(t, a, "data/m/x/d/2/raw"); got != "a2" {
				t.Fatalf("a's file after its refused commit: %q", got)
			}
			// Its next commit under the locks it holds now publishes it.
			if _, err := a.Commit(ctx, CommitOptions{Fences: []ledger.Fence{e.takeFence(lock, "a")}}); !errors.Is(err, ErrCommitConflict) {
				t.Fatalf("a's commit once it holds the lock again = %v, want the conflict over data/m/x/d/2/raw (both wrote it)", err)
			}
		})
	}
}

// A change wider than one commit under fences: each commit holds its fences'
// checks, so fewer partitions; every commit carries every fence.
func TestSplitCommitUnderFences(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	h, err := Open(Config{Cache: dir, Host: "a", Log: e.log, Blobs: e.blobs, CommitPartitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fa := e.takeFence("l", "a")
	mustSync(t, h, SyncOptions{})
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		writeFile(t, h, "data/m/"+p+"/d/1/raw", p)
	}
	res, err := h.Commit(context.Background(), CommitOptions{Fences: []ledger.Fence{fa}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 2 || res.Commits[0].Partitions != 3 || res.Commits[1].Partitions != 1 {
		t.Fatalf("commits %+v, want 3 partitions then 1 (CommitPartitions 3 leaves room for the fence)", res.Commits)
	}
	if st := mustStatus(t, h); st.HWM != st.Head || st.Head != 7 {
		t.Fatalf("hwm %d, head %d; want both 7: a fence record, 3+1 events, 2 fence checks", st.HWM, st.Head)
	}
	h2, err := Open(Config{Cache: t.TempDir(), Host: "a", Log: e.log, Blobs: e.blobs, CommitPartitions: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if got := h2.commitPartitions(CommitOptions{Fences: []ledger.Fence{fa, {Lock: "g", Seq: 1}}}); got != ledger.MaxBatch-2 {
		t.Fatalf("partitions a commit under two fences holds: %d, want %d", got, ledger.MaxBatch-2)
	}
}

package drivertest

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// The fencing cases of TestCommitLog (ledger.Fence): a commit made under a
// lock is stored only while its holder's fence record is the lock's last.

// logLock is the lock the fencing cases take: a swamp model lock's key.
const logLock = "data/command/shell/0b8e-vpc/.lock"

// logTake stores a fence record of lock for host and returns the fence.
func logTake(t *testing.T, ctx context.Context, l ledger.CommitLog, lock, host string) ledger.Fence {
	t.Helper()
	seq, err := l.TakeFence(ctx, logFenceRecord(t, ctx, l, lock, host))
	if err != nil {
		t.Fatalf("TakeFence(%s, %s): %v", lock, host, err)
	}
	return ledger.Fence{Lock: lock, Seq: seq}
}

func logFenceRecord(t *testing.T, ctx context.Context, l ledger.CommitLog, lock, host string) ledger.FenceRecord {
	t.Helper()
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.FenceRecord{V: ledger.FormatVersion, Ledger: info.UUID, Lock: lock, ID: id, Host: host,
		Holder: "me@" + host + " (pid 7)", At: time.Now().UTC().Truncate(time.Millisecond)}
}

// wantLockLost checks that err is f's lock lost to the fence record at last,
// taken by host taker, and no chain conflict.
func wantLockLost(t *testing.T, what string, err error, f ledger.Fence, last ledger.Seq, taker string) {
	t.Helper()
	var le *ledger.LockLostError
	switch {
	case !errors.As(err, &le) || !errors.Is(err, ledger.ErrLockLost):
		t.Fatalf("%s = %v, want a LockLostError", what, err)
	case errors.Is(err, ledger.ErrConflict):
		t.Fatalf("%s = %v: a lost lock is also a chain conflict (the caller would retry it)", what, err)
	case le.Lock != f.Lock || le.Fence != f.Seq || le.Last != last:
		t.Fatalf("%s = %+v, want lock %q, fence %d, last %d", what, le, f.Lock, f.Seq, last)
	case le.Taker == nil || le.Taker.Host != taker || le.Taker.Lock != f.Lock:
		t.Fatalf("%s names taker %+v, want host %s's fence record", what, le.Taker, taker)
	}
}

// A fenced commit is stored while its fence holds, its fence checks after its
// events; once another holder took the lock it is refused whole; readers skip
// fence records and checks; retention keeps the lock's last fence record.
func testLogFenced(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	fa := logTake(t, ctx, l, logLock, "host-a")
	other := logTake(t, ctx, l, "data/command/shell/other/.lock", "host-a")
	wantSeqs(t, "fence records", []ledger.Seq{fa.Seq, other.Seq}, 1, 2)

	// One partition, one fence: a batch of two.
	evs := logCommit(t, ctx, l, logNext(t, ctx, l, "a"))
	seqs, err := l.Append(ctx, evs, fa)
	if err != nil {
		t.Fatalf("Append under a fence that holds = %v", err)
	}
	wantSeqs(t, "fenced commit (its events' seqs)", seqs, 3)
	wantSeqs(t, "its fence checks", ledger.FenceCheckSeqs(seqs, 1), 4)
	// Two partitions, two fences.
	seqs, err = l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "a"), logNext(t, ctx, l, "b")), fa, other)
	if err != nil {
		t.Fatalf("Append under two fences that hold = %v", err)
	}
	wantSeqs(t, "commit under two fences", seqs, 5, 6)
	wantBounds(t, ctx, l, 1, 8)

	rs := logRead(t, ctx, l, 1, 0)
	wantSeqs(t, "Read", logSeqs(rs), 1, 2, 3, 4, 5, 6, 7, 8)
	for _, i := range []int{0, 1} {
		if sk := rs[i].Skip; sk == nil || sk.Fence == nil || sk.Fence.Host != "host-a" || sk.Check != nil || sk.Partition != "" || sk.Notice {
			t.Fatalf("record %d = %+v, want a fence record", rs[i].Seq, rs[i])
		}
	}
	if rs[0].Skip.Fence.Lock != logLock || rs[1].Skip.Fence.Lock != other.Lock {
		t.Fatalf("fence records of %q and %q, want %q and %q", rs[0].Skip.Fence.Lock, rs[1].Skip.Fence.Lock, logLock, other.Lock)
	}
	for _, c := range []struct {
		i     int
		fence ledger.Fence
	}{{3, fa}, {6, fa}, {7, other}} {
		sk := rs[c.i].Skip
		if sk == nil || sk.Check == nil || sk.Fence != nil || sk.Partition != "" || sk.Check.Lock != c.fence.Lock || sk.Check.Fence != c.fence.Seq {
			t.Fatalf("record %d = %+v, want the fence check of %v", rs[c.i].Seq, rs[c.i], c.fence)
		}
	}
	if sk := rs[3].Skip; sk.Check.Commit != evs[0].Commit {
		t.Fatalf("fence check of commit %s, want %s", sk.Check.Commit, evs[0].Commit)
	}
	for _, i := range []int{2, 4, 5} {
		if rs[i].Skip != nil || rs[i].Event.Commit == "" {
			t.Fatalf("record %d = %+v, want an event", rs[i].Seq, rs[i])
		}
	}
	if !rs[2].LastOfCommit() || rs[4].LastOfCommit() || !rs[5].LastOfCommit() {
		t.Fatal("the events' parts are not their commits'")
	}
	// The chain goes on from the events: fence checks are no link.
	if n := logNext(t, ctx, l, "a"); n.prev != 5 || n.modelSeq != 3 {
		t.Fatalf("a's next part: prev %d modelSeq %d, want 5 and 3", n.prev, n.modelSeq)
	}

	// Another holder takes the lock: the first holder's fence is lost.
	fb := logTake(t, ctx, l, logLock, "host-b")
	_, err = l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "c")), fa)
	wantLockLost(t, "Append under a fence another holder took since", err, fa, fb.Seq, "host-b")
	_, err = l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "a"), logNext(t, ctx, l, "c")), other, fa)
	wantLockLost(t, "Append under two fences, the second lost", err, fa, fb.Seq, "host-b")
	wantBounds(t, ctx, l, 1, fb.Seq)
	// The new holder's fence holds.
	if _, err := l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "c")), fb); err != nil {
		t.Fatalf("Append under the new holder's fence = %v", err)
	}

	// Retention keeps each lock's last fence record: the new holder's fence
	// still holds after the log dropped everything it may below the head.
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateBefore(ctx, last+1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "b")), fb, other); err != nil {
		t.Fatalf("Append under fences whose records retention kept = %v", err)
	}
	_, err = l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "b")), fa)
	wantLockLost(t, "Append under the lost fence after retention", err, fa, fb.Seq, "host-b")
}

// A lost lock and a chain conflict at once are a lost lock (never retried);
// a chain conflict under fences that hold is a conflict, not a lost lock.
func testLogLockLostOrConflict(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	fa := logTake(t, ctx, l, logLock, "host-a")
	logAppend(t, ctx, l, "a")
	stale := logPart{partition: "a", modelSeq: 1} // a has an event: Prev 0 conflicts

	_, err := l.Append(ctx, logCommit(t, ctx, l, stale), fa)
	var ce *ledger.ConflictError
	if !errors.As(err, &ce) || ce.Partition != "a" || errors.Is(err, ledger.ErrLockLost) {
		t.Fatalf("stale Append under a fence that holds = %v, want a ConflictError on a and no lost lock", err)
	}
	fb := logTake(t, ctx, l, logLock, "host-b")
	_, err = l.Append(ctx, logCommit(t, ctx, l, stale), fa)
	wantLockLost(t, "stale Append under a lost fence", err, fa, fb.Seq, "host-b")
	_, err = l.Append(ctx, logCommit(t, ctx, l, logNext(t, ctx, l, "b"), stale), fa)
	wantLockLost(t, "two-partition stale Append under a lost fence", err, fa, fb.Seq, "host-b")
	wantBounds(t, ctx, l, 1, fb.Seq)
}

// A fenced Append retried after an answer that did not come (a lost ack, a
// timeout: ErrOutcomeUnknown) returns the stored seqs, even once another
// holder took the lock: the commit was stored while the fence held. TakeFence
// retried stores its record once.
func testLogFencedRetry(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	rec := logFenceRecord(t, ctx, l, logLock, "host-a")
	s1, err := l.TakeFence(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := l.TakeFence(ctx, rec)
	if err != nil || s2 != s1 {
		t.Fatalf("retried TakeFence = %d, %v; want the stored seq %d", s2, err, s1)
	}
	fa := ledger.Fence{Lock: logLock, Seq: s1}
	evs := logCommit(t, ctx, l, logNext(t, ctx, l, "a"), logNext(t, ctx, l, "b"))
	first, err := l.Append(ctx, evs, fa)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Append(ctx, evs, fa)
	if err != nil {
		t.Fatalf("retried fenced Append = %v, want the stored seqs", err)
	}
	wantSeqs(t, "retried fenced Append", again, first...)
	fb := logTake(t, ctx, l, logLock, "host-b")
	again, err = l.Append(ctx, evs, fa)
	if err != nil {
		t.Fatalf("fenced Append retried after another holder took the lock = %v, want the seqs stored before", err)
	}
	wantSeqs(t, "fenced Append retried after the lock passed", again, first...)
	wantBounds(t, ctx, l, 1, fb.Seq)
}

// Fences the log refuses, storing nothing: a lock twice, seq 0, a lock name
// that is not one; a fence record of another ledger or without a lock.
func testLogFenceRefuses(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	fa := logTake(t, ctx, l, logLock, "host-a")
	evs := func() []ledger.Event { return logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1}) }
	for _, c := range []struct {
		name   string
		fences []ledger.Fence
	}{
		{"a lock twice", []ledger.Fence{fa, fa}},
		{"seq 0", []ledger.Fence{{Lock: logLock}}},
		{"no lock", []ledger.Fence{{Seq: fa.Seq}}},
	} {
		if _, err := l.Append(ctx, evs(), c.fences...); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Append with %s = %v, want ErrInvalid", c.name, err)
		}
	}
	rec := logFenceRecord(t, ctx, l, logLock, "host-a")
	rec.Ledger = "00000000-0000-4000-8000-000000000000"
	if _, err := l.TakeFence(ctx, rec); !errors.Is(err, ledger.ErrLineage) {
		t.Errorf("TakeFence of another ledger = %v, want ErrLineage", err)
	}
	rec = logFenceRecord(t, ctx, l, "", "host-a")
	if _, err := l.TakeFence(ctx, rec); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("TakeFence without a lock = %v, want ErrInvalid", err)
	}
	wantBounds(t, ctx, l, 1, fa.Seq)
}

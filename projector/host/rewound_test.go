package host

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// rewoundLog is a log whose server lost its last events: it answers last seqs
// below what was stored, as a server restored from an older backup would.
type rewoundLog struct {
	ledger.CommitLog
	by ledger.Seq
}

func (l rewoundLog) LastSeq(ctx context.Context) (ledger.Seq, error) {
	s, err := l.CommitLog.LastSeq(ctx)
	return s - min(s, l.by), err
}

func (l rewoundLog) PartitionLastSeq(ctx context.Context, p string) (ledger.Seq, error) {
	s, err := l.CommitLog.PartitionLastSeq(ctx, p)
	return s - min(s, l.by), err
}

// A log that ends below the cache's HWM (or a partition below its mark) is an
// error naming what to do, never "up to date": the fast paths used to answer
// that nothing was new.
func TestSyncRefusesRewoundLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.host("a")
	for _, p := range []string{"audit/1", "audit/2"} {
		writeFile(t, a, p, p)
		mustCommit(t, a, "")
	}
	mustSync(t, a, SyncOptions{})
	dir := a.Dir().Root()
	a.Close()
	b, err := Open(Config{Cache: dir, Host: "a", Log: rewoundLog{e.log, 1}, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, opt := range []SyncOptions{{}, {Partitions: []string{"audit"}}} {
		res, err := b.Sync(context.Background(), opt)
		if !errors.Is(err, ledger.ErrRewound) || res.UpToDate {
			t.Errorf("sync %+v of a rewound log: %+v, %v; want ErrRewound", opt, res, err)
		}
	}
}

// TestSyncAfterAnotherProcessMovedHWM: a log answers its first LastSeq from its
// opening (natsjs.OpenLog's request); when another process applied newer
// commits to the cache meanwhile, that answer is below the cache's HWM, and the
// sync asks again instead of calling the log rewound.
func TestSyncAfterAnotherProcessMovedHWM(t *testing.T) {
	e := newNATSEnv(t)
	ctx := context.Background()
	w := e.host("writer")
	writeFile(t, w, "a/1", "one")
	mustCommit(t, w, "one")
	stale, err := natsjs.OpenLog(ctx, e.nc, "test", natsjs.WithOpenSeq()) // answers its first LastSeq with seq 1
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, w, "a/2", "two")
	mustCommit(t, w, "two")

	dir := t.TempDir()
	other, err := Open(Config{Cache: dir, Host: "h", Log: e.log, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustSync(t, other, SyncOptions{}); res.HWM != 2 {
		t.Fatalf("the other process's sync reached hwm %d, want 2", res.HWM)
	}
	other.Close()

	h, err := Open(Config{Cache: dir, Host: "h", Log: stale, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := h.Sync(ctx, SyncOptions{})
	if err != nil || !res.UpToDate || res.HWM != 2 || res.Head != 2 {
		t.Fatalf("sync = %+v, %v; want up to date at hwm 2, head 2", res, err)
	}
}

// TestSyncDetectsForkAtHWM is issue 39's silent divergence: a server
// restored from an older backup (the log rewound to seq 3), then written to
// until its head is again this host's HWM. Seqs alone say "up to date"; the
// commit at the HWM says otherwise.
func TestSyncDetectsForkAtHWM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := e.host("a"), e.host("b"), e.host("c")
	for i, h := range []*Host{a, b, a} {
		writeFile(t, h, fmt.Sprintf("audit/%d", i), "before the backup")
		mustCommit(t, h, "")
	}
	mustSync(t, c, SyncOptions{})
	writeFile(t, a, "data/m/1/raw", "a's run, after the backup")
	mustCommit(t, a, "")
	writeFile(t, a, "data/m/2/raw", "a's next run")
	mustCommit(t, a, "")
	if res := mustSync(t, b, SyncOptions{}); res.HWM != 5 {
		t.Fatalf("b's HWM = %d, want 5", res.HWM)
	}
	e.mem.Rewind(3) // the backup taken at seq 3, restored
	writeFile(t, c, "data/m/1/raw", "c's run, on the restored server")
	mustCommit(t, c, "")
	writeFile(t, c, "audit/c", "c")
	mustCommit(t, c, "") // head 5 again
	res, err := b.Sync(context.Background(), SyncOptions{})
	var fe *ForkError
	if res.UpToDate || !errors.Is(err, ledger.ErrRewound) || !errors.As(err, &fe) || fe.Seq != 5 || fe.Got == "" {
		t.Fatalf("sync at an HWM whose commit the log replaced = %+v, %v; want a *ForkError at seq 5", res, err)
	}
	// A partition's mark is checked the same way by a scoped sync.
	res, err = b.Sync(context.Background(), SyncOptions{Partitions: []string{ledger.PartitionKey("data/m/1/raw")}})
	if res.UpToDate || !errors.As(err, &fe) || fe.Partition == "" {
		t.Fatalf("scoped sync of a partition whose mark's commit the log replaced = %+v, %v; want a *ForkError", res, err)
	}
}

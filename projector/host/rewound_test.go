package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/statedb"
)

// A log that ends below the cache's HWM (or a partition below its mark) is
// never "up to date": the fast paths used to answer that nothing was new.
// The sync heals it (heal.go): what the ledger lost is republished from the
// cache, full and scoped alike.
func TestSyncRefusesRewoundLog(t *testing.T) {
	t.Parallel()
	for _, opt := range []SyncOptions{{}, {Partitions: []string{"audit"}}} {
		e := newEnv(t)
		a := e.host("a")
		for _, p := range []string{"audit/1", "audit/2"} {
			writeFile(t, a, p, p)
			mustCommit(t, a, "")
		}
		mustSync(t, a, SyncOptions{})
		e.mem.Rewind(1)
		res, err := a.Sync(context.Background(), opt)
		if err != nil || res.UpToDate || res.Healed == nil || res.Healed.Fork == nil {
			t.Fatalf("sync %+v of a rewound log: %+v, %v; want it healed", opt, res, err)
		}
		if got, _ := readFile(t, a, "audit/2"); got != "audit/2" {
			t.Fatalf("audit/2 after the heal: %q", got)
		}
		if last, _ := e.log.LastSeq(context.Background()); last != 2 {
			t.Fatalf("the log's last seq after the heal = %d, want 2 (audit/2 republished)", last)
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

// forkedEnv makes TestSyncDetectsForkAtHWM's story: a and b committed
// after the backup at seq 3 (b synced to seq 5), the server restored, and c
// wrote until the head is 5 again. It returns the hosts.
func forkedEnv(t *testing.T) (e *env, a, b, c *Host) {
	t.Helper()
	e = newEnv(t)
	a, b, c = e.host("a"), e.host("b"), e.host("c")
	for i, h := range []*Host{a, b, a} {
		writeFile(t, h, fmt.Sprintf("audit/%d", i), "before the backup")
		mustCommit(t, h, "")
	}
	mustSync(t, c, SyncOptions{})
	writeFile(t, a, "data/m/1/raw", "a's run, after the backup")
	mustCommit(t, a, "")
	writeFile(t, b, "data/n/1/raw", "b's run, after the backup")
	mustCommit(t, b, "")
	mustSync(t, b, SyncOptions{})
	e.mem.Rewind(3)
	writeFile(t, c, "data/m/1/raw", "c's run, on the restored server")
	mustCommit(t, c, "")
	writeFile(t, c, "audit/c", "c")
	mustCommit(t, c, "")
	return e, a, b, c
}

// TestStatusAndCommitSeeFork: status reports the fork (not "behind 0"), and a
// commit refuses to publish on top of a history the log no longer holds,
// publishing nothing.
func TestStatusAndCommitSeeFork(t *testing.T) {
	t.Parallel()
	e, _, b, _ := forkedEnv(t)
	st := mustStatus(t, b)
	if st.Forked == nil || st.Forked.Seq != 5 || st.Behind != 0 {
		t.Fatalf("status of a forked cache: forked %+v, behind %d; want the fork at seq 5", st.Forked, st.Behind)
	}
	writeFile(t, b, "audit/b-later", "b's edit on the forked cache")
	before, _ := e.log.LastSeq(context.Background())
	_, err := b.Commit(context.Background(), CommitOptions{Message: "on a fork"})
	if !errors.Is(err, ledger.ErrRewound) {
		t.Fatalf("commit on a forked cache = %v, want ErrRewound", err)
	}
	if after, _ := e.log.LastSeq(context.Background()); after != before {
		t.Fatalf("the forked commit published: head %d → %d", before, after)
	}
}

// TestHealAfterRestore is issue 39's story on the library: after a backup at
// seq 3, a and b each published a run (b synced both); the server was
// restored from the backup and c wrote until the head was b's HWM again, c's
// run at the path of a's. Each host detects the fork, even b at head ==
// HWM; none deletes anything: b republishes its run, a's run stays under the
// conflicts directory of both (the ledger holds c's at that path), and all
// hosts converge.
func TestHealAfterRestore(t *testing.T) {
	t.Parallel()
	e, a, b, c := forkedEnv(t)
	ctx := context.Background()
	res, err := b.Sync(ctx, SyncOptions{})
	if err != nil || res.UpToDate || res.Healed == nil {
		t.Fatalf("b's sync at head == HWM on a forked ledger = %+v, %v; want healed", res, err)
	}
	hd := res.Healed
	if hd.Fork == nil || hd.Fork.Seq != 5 || hd.Common != 3 {
		t.Fatalf("b's heal: fork %+v, common %d; want the fork at 5, common 3", hd.Fork, hd.Common)
	}
	if !slices.Equal(hd.Republish, []string{"data/n/1/raw"}) || !slices.Equal(hd.Kept, []string{"data/m/1/raw"}) || hd.Published == nil || hd.Published.Nothing {
		t.Fatalf("b's heal: republish %v, kept %v, published %+v; want b's run republished, a's kept", hd.Republish, hd.Kept, hd.Published)
	}
	kept, err := os.ReadFile(filepath.Join(b.Dir().Root(), filepath.FromSlash(hd.KeptIn), "data/m/1/raw"))
	if err != nil || string(kept) != "a's run, after the backup" {
		t.Fatalf("a's run kept by b: %q, %v", kept, err)
	}
	// a's HWM (4) is below the head; its commit there is c's now.
	res, err = a.Sync(ctx, SyncOptions{})
	if err != nil || res.Healed == nil || !slices.Equal(res.Healed.Kept, []string{"data/m/1/raw"}) {
		t.Fatalf("a's sync = %+v, %v; want healed, its run kept", res, err)
	}
	for _, h := range []*Host{a, b, c} {
		mustSync(t, h, SyncOptions{})
	}
	want := cacheFiles(t, c)
	for _, h := range []*Host{a, b} {
		if diff := cmp.Diff(want, cacheFiles(t, h)); diff != "" {
			t.Fatalf("host %s differs from c (-c +%s):\n%s", h.cfg.Host, h.cfg.Host, diff)
		}
	}
	if want["data/n/1/raw"] != "b's run, after the backup" || want["data/m/1/raw"] != "c's run, on the restored server" {
		t.Fatalf("the converged cache: %v", want)
	}
	for _, h := range []*Host{a, b, c} {
		if st := mustStatus(t, h); st.Forked != nil || len(st.Dirty) != 0 || st.HWM != st.Head {
			t.Fatalf("host %s after the heal: forked %+v, dirty %v, hwm %d, head %d", h.cfg.Host, st.Forked, st.Dirty, st.HWM, st.Head)
		}
	}
	_ = e
}

// TestHealRewoundOnly: restored and not written to since (the head below
// the HWMs). b, which synced both runs, republishes both; a finds its run
// the ledger's again (dropped as the same) and republishes nothing.
func TestHealRewoundOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "audit/0", "before")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	writeFile(t, a, "data/m/1/raw", "a's run")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	writeFile(t, b, "data/n/1/raw", "b's run")
	mustCommit(t, b, "")
	writeFile(t, b, "audit/0", "b's edit, not committed")
	e.mem.Rewind(1)
	ctx := context.Background()
	res, err := b.Sync(ctx, SyncOptions{})
	if err != nil || res.Healed == nil || !slices.Equal(res.Healed.Republish, []string{"data/m/1/raw", "data/n/1/raw"}) ||
		!slices.Equal(res.Healed.Local, []string{"audit/0"}) {
		t.Fatalf("b's heal = %+v, %v; want both runs republished, its edit put back uncommitted", res.Healed, err)
	}
	if got, _ := readFile(t, b, "audit/0"); got != "b's edit, not committed" {
		t.Fatalf("b's local edit after the heal: %q", got)
	}
	if st := mustStatus(t, b); !slices.Equal(st.Dirty, []string{"audit/0"}) {
		t.Fatalf("b's uncommitted edit: dirty %v; want it still uncommitted", st.Dirty)
	}
	res, err = a.Sync(ctx, SyncOptions{})
	if err != nil || res.Healed == nil || res.Healed.Same != 1 || len(res.Healed.Republish) != 0 || len(res.Healed.Kept) != 0 {
		t.Fatalf("a's heal = %+v, %v; want its run found the same", res.Healed, err)
	}
	if diff := cmp.Diff(cacheFiles(t, a), map[string]string{"audit/0": "before", "data/m/1/raw": "a's run", "data/n/1/raw": "b's run"}); diff != "" {
		t.Fatalf("a's cache:\n%s", diff)
	}
}

// TestRebuildOnRewoundKeeps: `rebuild` on a rewound ledger used to remove
// the files the server lost ("0 files restored, 0 kept, 495 removed"). It
// keeps them, put back uncommitted, for a commit to republish.
func TestRebuildOnRewoundKeeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.host("a")
	for _, p := range []string{"audit/1", "data/m/1/raw", "data/m/2/raw"} {
		writeFile(t, a, p, p)
		mustCommit(t, a, "")
	}
	e.mem.Rewind(1)
	res, err := a.Rebuild(context.Background(), RebuildOptions{})
	if err != nil || res.Healed == nil || len(res.Healed.Republish) != 2 || res.Healed.Published != nil {
		t.Fatalf("rebuild of a rewound ledger = %+v, %v; want two files put back", res, err)
	}
	for _, p := range []string{"data/m/1/raw", "data/m/2/raw"} {
		if got, _ := readFile(t, a, p); got != p {
			t.Fatalf("%s after the rebuild: %q", p, got)
		}
	}
	if cr := mustCommit(t, a, "republish"); cr.Written != 2 {
		t.Fatalf("the commit after the rebuild published %d files, want 2", cr.Written)
	}
}

// TestScopedSyncHeals: a scoped sync that finds its partition's mark gone
// heals the cache too.
func TestScopedSyncHeals(t *testing.T) {
	t.Parallel()
	_, _, b, _ := forkedEnv(t)
	res, err := b.Sync(context.Background(), SyncOptions{Partitions: []string{ledger.PartitionKey("data/n/1/raw")}})
	if err != nil || res.Healed == nil || !slices.Equal(res.Healed.Republish, []string{"data/n/1/raw"}) {
		t.Fatalf("scoped sync on a fork = %+v, %v; want healed", res, err)
	}
}

// TestWatchHealsAfterRestore: a watch running while its server is restored
// from an older backup and written to applies nothing of the other history
// on top of its own: before each commit it checks the log's commit at the
// top commit, and on a fork it syncs again, which heals.
func TestWatchHealsAfterRestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "audit/0", "before the backup")
	mustCommit(t, a, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan SyncResult, 100)
	done := make(chan error, 1)
	go func() { done <- b.Watch(ctx, SyncOptions{}, func(r SyncResult) { got <- r }) }()
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for !ok() {
			select {
			case <-got:
			case err := <-done:
				t.Fatalf("watch stopped with %v while waiting for %s", err, what)
			case <-deadline:
				t.Fatalf("watch: no %s", what)
			}
		}
	}
	has := func(p, want string) func() bool {
		return func() bool { s, ok := readFile(t, b, p); return ok && s == want }
	}
	wait("first commit", has("audit/0", "before the backup"))
	writeFile(t, a, "data/m/1/raw", "a's run, after the backup")
	mustCommit(t, a, "")
	wait("a's run", has("data/m/1/raw", "a's run, after the backup"))
	e.mem.Rewind(1)
	c := e.host("c")
	writeFile(t, c, "data/x/1/raw", "c's run, on the restored server")
	mustCommit(t, c, "") // seq 2 again, another commit
	writeFile(t, c, "audit/c", "c")
	mustCommit(t, c, "")
	// b republishes a's run (the watch's heal), and follows c's commits.
	wait("the heal", func() bool {
		last, _ := e.log.LastSeq(context.Background())
		s, ok := readFile(t, b, "audit/c")
		return last >= 4 && ok && s == "c"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch stopped with %v", err)
	}
	mustSync(t, c, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, c), cacheFiles(t, b)); diff != "" {
		t.Fatalf("b's cache differs from c's after the watch healed (-c +b):\n%s", diff)
	}
	if s, _ := readFile(t, c, "data/m/1/raw"); s != "a's run, after the backup" {
		t.Fatalf("a's run not republished: c holds %q", s)
	}
}

// TestOldCacheAdoptsTopCommit: a cache made by a release before the commit
// records (no commits bucket, no top commit) syncs as before — up to date at
// the head, no heal — and records the top commit on the way, once its marks
// and rows agree with the log's event at its HWM (and is healed when they do
// not: a cache of another history).
func TestOldCacheAdoptsTopCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	for _, p := range []string{"audit/1", "data/m/1/raw", "data/n/1/raw"} {
		writeFile(t, a, p, p)
		mustCommit(t, a, "")
	}
	mustSync(t, b, SyncOptions{})
	forget := func(h *Host) {
		t.Helper()
		dir := h.Dir().Root()
		h.Close()
		db, err := bolt.Open(filepath.Join(dir, ledger.StateDir, "state.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			if err := tx.DeleteBucket([]byte("commits")); err != nil {
				return err
			}
			// A release before the records wrote no top commit, nor the
			// stamp of the message at its HWM.
			meta := tx.Bucket([]byte("meta"))
			if err := meta.Delete([]byte("top-stamp")); err != nil {
				return err
			}
			return meta.Delete([]byte("top-commit"))
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	forget(b)
	b = e.hostAt("b", b.Dir().Root())
	res, err := b.Sync(context.Background(), SyncOptions{})
	if err != nil || !res.UpToDate || res.Healed != nil {
		t.Fatalf("an older cache's sync at the head = %+v, %v; want up to date, no heal", res, err)
	}
	var top statedb.Commit
	if err := b.View(func(db *statedb.DB) (err error) { top, err = db.TopCommit(); return err }); err != nil || top.Seq != 3 || !top.Known() {
		t.Fatalf("top commit after the older cache's sync: %+v, %v; want the one at seq 3", top, err)
	}
	// An older cache of a history the log no longer holds: found forked.
	forget(b)
	b = e.hostAt("b", b.Dir().Root())
	e.mem.Rewind(2)
	writeFile(t, a, "data/x/1/raw", "another commit at seq 3")
	if _, err := a.Commit(context.Background(), CommitOptions{}); !errors.Is(err, ledger.ErrRewound) {
		t.Fatalf("a's commit on the rewound log: %v", err)
	}
	c := e.host("c")
	writeFile(t, c, "data/x/1/raw", "c's commit at seq 3")
	mustCommit(t, c, "")
	res, err = b.Sync(context.Background(), SyncOptions{})
	if err != nil || res.UpToDate || res.Healed == nil || !slices.Equal(res.Healed.Republish, []string{"data/n/1/raw"}) {
		t.Fatalf("an older cache's sync on another history = %+v, %v; want healed, data/n republished", res, err)
	}
}

// countingLog counts the identity checks' requests.
type countingLog struct {
	ledger.CommitLog
	commitAt int
	reads    int
}

func (l *countingLog) Read(ctx context.Context, from, to ledger.Seq, fn func(ledger.Record) error) error {
	l.reads++
	return l.CommitLog.Read(ctx, from, to, fn)
}

func (l *countingLog) CommitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	l.commitAt++
	return l.CommitLog.CommitAt(ctx, seq)
}

// TestNoOpSyncChecksByStamp: a no-op sync checks the top commit by the log's
// stamp of its head, in the request it makes anyway: a CommitAt only when the
// stamp is not the one recorded (after the host's own commit, once), none
// after a sync that read to the head, none when nothing changed.
func TestNoOpSyncChecksByStamp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.host("a")
	cl := &countingLog{CommitLog: e.log}
	b, err := Open(Config{Cache: t.TempDir(), Host: "b", Log: cl, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	writeFile(t, a, "audit/1", "a")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{}) // read to the head: its stamp recorded
	n := cl.commitAt
	for range 3 {
		if res := mustSync(t, b, SyncOptions{}); !res.UpToDate {
			t.Fatalf("no-op sync: %+v", res)
		}
	}
	if cl.commitAt != n {
		t.Fatalf("three no-op syncs after a sync to the head asked CommitAt %d times, want 0", cl.commitAt-n)
	}
	writeFile(t, b, "audit/2", "b")
	if _, err := b.Commit(context.Background(), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	n = cl.commitAt
	for range 3 {
		mustSync(t, b, SyncOptions{})
	}
	if cl.commitAt != n+1 {
		t.Fatalf("three no-op syncs after b's own commit asked CommitAt %d times, want once", cl.commitAt-n)
	}
	// A head that is no event (a lock's fence record, above the top
	// commit): its stamp, recorded by the sync that read it, serves too.
	e.takeFence("model/m", "a")
	mustSync(t, b, SyncOptions{})
	n, r := cl.commitAt, cl.reads
	for range 3 {
		if res := mustSync(t, b, SyncOptions{}); !res.UpToDate {
			t.Fatalf("no-op sync at a fence record: %+v", res)
		}
	}
	if cl.commitAt != n || cl.reads != r {
		t.Fatalf("three no-op syncs at a fence record asked CommitAt %d times and read %d times, want neither", cl.commitAt-n, cl.reads-r)
	}
}

// A cache whose HWM is past its top commit — the messages above it are no
// events (a lock's fence record, a quarantine notice) — applied nothing
// there; a restored log written to since may hold an event there. b's HWM
// is a fence record above a's commit; the server restored to that commit,
// c's commit takes the fence's seq: head == HWM and the top commit agrees,
// yet b lacks c's commit. Sync, status and commit must see the fork, and the
// sync heal it: b ends with c's file and a's. (Found when fences came: the
// top commit alone was checked.)
func TestForkPastTopCommit(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"sync", "status", "commit"} {
		t.Run(path, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a, b, c := e.host("a"), e.host("b"), e.host("c")
			writeFile(t, a, "audit/a", "a")
			mustCommit(t, a, "") // seq 1
			mustSync(t, c, SyncOptions{})
			e.takeFence("model/m", "a") // seq 2: no event
			if res := mustSync(t, b, SyncOptions{}); res.HWM != 2 {
				t.Fatalf("b's sync reached hwm %d, want 2", res.HWM)
			}
			e.mem.Rewind(1)
			writeFile(t, c, "audit/c", "c")
			mustCommit(t, c, "") // seq 2 again: an event b never applied
			switch path {
			case "status":
				if st := mustStatus(t, b); st.Forked == nil || st.Forked.Seq != 2 {
					t.Fatalf("status: forked %+v, behind %d; want the fork at seq 2", st.Forked, st.Behind)
				}
				return
			case "commit":
				writeFile(t, b, "audit/b", "b")
				if _, err := b.Commit(ctx, CommitOptions{}); !errors.Is(err, ledger.ErrRewound) {
					t.Fatalf("commit on a forked cache = %v, want ErrRewound", err)
				}
				return
			default:
				res, err := b.Sync(ctx, SyncOptions{})
				if err != nil || res.UpToDate || res.Healed == nil || res.Healed.Fork == nil {
					t.Fatalf("sync of b = %+v, %v; want the fork at seq 2 healed", res, err)
				}
			}
			if got, _ := readFile(t, b, "audit/c"); got != "c" {
				t.Fatalf("b's audit/c after the heal = %q, want c's commit", got)
			}
			if got, _ := readFile(t, b, "audit/a"); got != "a" {
				t.Fatalf("b's audit/a after the heal = %q", got)
			}
		})
	}
}

// TestWatchHealsPastTopCommit is TestForkPastTopCommit for a watch: its
// first sync leaves the HWM at a fence record above the top commit; the
// server is restored to the top commit and c's commits take the fence's seq
// and the next. Before applying c's second commit the watch finds the event
// where it passed the fence record, heals and follows on: b ends as c.
func TestWatchHealsPastTopCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := e.host("a"), e.host("b"), e.host("c")
	writeFile(t, a, "audit/a", "a")
	mustCommit(t, a, "") // seq 1
	mustSync(t, c, SyncOptions{})
	e.takeFence("model/m", "a") // seq 2: no event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan SyncResult, 100)
	done := make(chan error, 1)
	go func() { done <- b.Watch(ctx, SyncOptions{}, func(r SyncResult) { got <- r }) }()
	wait := func(what string, ok func(SyncResult) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case r := <-got:
				if ok(r) {
					return
				}
			case err := <-done:
				t.Fatalf("watch stopped with %v while waiting for %s", err, what)
			case <-deadline:
				t.Fatalf("watch: no %s", what)
			}
		}
	}
	wait("the first sync past the fence record", func(r SyncResult) bool { return r.HWM >= 2 })
	e.mem.Rewind(1)
	writeFile(t, c, "audit/c", "c")
	mustCommit(t, c, "") // seq 2 again: an event b passed no event at
	writeFile(t, c, "audit/c2", "c2")
	mustCommit(t, c, "") // seq 3: the watch's next commit
	wait("the heal", func(SyncResult) bool {
		s, ok := readFile(t, b, "audit/c")
		s2, ok2 := readFile(t, b, "audit/c2")
		return ok && s == "c" && ok2 && s2 == "c2"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch stopped with %v", err)
	}
	mustSync(t, c, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, c), cacheFiles(t, b)); diff != "" {
		t.Fatalf("b's cache differs from c's after the watch healed (-c +b):\n%s", diff)
	}
}

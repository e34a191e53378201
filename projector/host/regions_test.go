package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// regionEnv is a ledger on an origin, its mirror in region B, and the
// logs of a host of each region: the origin's reads the origin, region B's
// reads the mirror and writes to the origin through Far.
type regionEnv struct {
	*env
	r     *natsjstest.Regions
	bLog  *natsjs.Log // region B's log
	bConn *natsjs.Client
}

func newRegionEnv(t *testing.T) *regionEnv {
	t.Helper()
	ctx := context.Background()
	r := natsjstest.RunRegions(t)
	nc := natsjstest.Connect(t, r.Origin.ClientURL())
	lg, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "test", Blobs: "file:///unused"})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: r.Origin.ClientURL()}, Read: natsjs.Endpoint{URL: r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateMirror(ctx, "test", 1); err != nil {
		t.Fatal(err)
	}
	c, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: r.FarURL()}, Read: natsjs.Endpoint{URL: r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	bl, err := c.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := withBlobs(t, &env{t: t, nc: nc, log: lg, uuid: lg.UUID()})
	return &regionEnv{env: e, r: r, bLog: bl, bConn: c}
}

// hostB opens a host of region B (its log reads the mirror).
func (e *regionEnv) hostB(name string) *Host {
	e.t.Helper()
	h, err := Open(Config{Cache: e.t.TempDir(), Host: name, Log: e.bLog, Blobs: e.blobs})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Close() })
	return h
}

// waitMirror waits until region B's mirror holds seq (its head says so).
func (e *regionEnv) waitMirror(seq ledger.Seq) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, err := e.bLog.Head(context.Background(), ledger.HeadRequest{})
		if err == nil && h.Seq >= seq && !h.FromOrigin() {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the mirror did not reach seq %d: %+v, %v", seq, h, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRegionHostSeesItsCommit: with the link between the regions stalled (the
// mirror holds nothing new), a host of region B commits through the origin;
// its syncs say it is up to date at its own commit — never rewound, though
// the mirror is behind its HWM — and its status names the head's source. A
// fresh process (a new log, without the first one's knowledge) asks the
// origin before it would call the log rewound.
func TestRegionHostSeesItsCommit(t *testing.T) {
	e := newRegionEnv(t)
	ctx := context.Background()
	a := e.host("a")
	writeFile(t, a, "data/m/1", "one")
	mustCommit(t, a, "one")
	e.waitMirror(1)
	b := e.hostB("b")
	if res := mustSync(t, b, SyncOptions{}); res.HWM != 1 || res.Source == nil || res.Source.FromOrigin() {
		t.Fatalf("region B's first sync: %+v; want hwm 1 from the mirror", res)
	}
	e.r.Link.Stall(true, true)
	defer e.r.Link.Resume()
	writeFile(t, b, "data/m/2", "two")
	if res := mustCommit(t, b, "two"); res.Seqs[0] != 2 {
		t.Fatalf("region B's commit: %+v", res)
	}
	res := mustSync(t, b, SyncOptions{})
	if !res.UpToDate || res.HWM != 2 {
		t.Fatalf("region B's sync after its own commit: %+v; want up to date at 2", res)
	}
	if res := mustSync(t, b, SyncOptions{Partitions: []string{ledger.PartitionKey("data/m/2")}}); res.HWM != 2 {
		t.Fatalf("region B's scoped sync after its own commit: %+v", res)
	}
	st, err := b.Status(ctx)
	if err != nil || st.Source == nil || st.HWM != 2 || st.Head != 2 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	// Another process: its log knows nothing of the commit, and the mirror
	// lags it. The origin decides.
	c2, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: e.r.FarURL()}, Read: natsjs.Endpoint{URL: e.r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	l2, err := c2.Ledger("test").Log(ctx, natsjs.WithOpenSeq())
	if err != nil {
		t.Fatal(err)
	}
	dir := b.Dir().Root()
	b.Close()
	b2, err := Open(Config{Cache: dir, Host: "b", Log: l2, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	res, err = b2.Sync(ctx, SyncOptions{Partitions: []string{ledger.PartitionKey("data/m/2")}})
	// (The origin answers: its head, asked when the mirror's tip is below
	// the mark, or the tip itself once the Log's check of the origin raised
	// its floor past the mirror.)
	if err != nil || !res.UpToDate || res.Healed != nil || res.Rebuilt || (res.Source != nil && !res.Source.FromOrigin()) {
		t.Fatalf("a new process's scoped sync behind a lagging mirror: %+v, %v; want up to date, by the origin's word, never healed", res, err)
	}
	res, err = b2.Sync(ctx, SyncOptions{})
	if err != nil || !res.UpToDate || res.HWM != 2 || res.Healed != nil || res.Source == nil || !res.Source.FromOrigin() {
		t.Fatalf("a new process's sync behind a lagging mirror: %+v, %v; want up to date at 2, by the origin's word", res, err)
	}
}

// TestRegionFreshPull: a commit at the origin the stalled mirror lacks is
// "nothing new" to region B's plain scoped sync (the mirror's hint, which
// says how old it is), and is pulled by a fresh one (a lock holder's: the
// origin's head first), from the origin once the mirror was waited for.
func TestRegionFreshPull(t *testing.T) {
	e := newRegionEnv(t)
	a := e.host("a")
	writeFile(t, a, "data/m/1", "one")
	mustCommit(t, a, "one")
	e.waitMirror(1)
	b := e.hostB("b")
	mustSync(t, b, SyncOptions{})
	e.r.Link.Stall(true, true)
	defer e.r.Link.Resume()
	writeFile(t, a, "data/m/1", "two")
	mustCommit(t, a, "two")
	scope := []string{ledger.PartitionKey("data/m/1")}
	if res := mustSync(t, b, SyncOptions{Partitions: scope}); !res.UpToDate {
		t.Fatalf("a plain scoped sync behind the stalled mirror: %+v (the mirror's hint was expected: nothing new)", res)
	}
	res := mustSync(t, b, SyncOptions{Partitions: scope, Fresh: true})
	if res.UpToDate || res.Applied != 1 || res.Source == nil || !res.Source.FromOrigin() || res.Source.Seq != 2 {
		t.Fatalf("a fresh scoped sync: %+v; want the origin's commit 2 applied", res)
	}
	if got, _ := readFile(t, b, "data/m/1"); got != "two" {
		t.Fatalf("data/m/1 = %q after the fresh sync", got)
	}
	// A full fresh sync reaches the origin's head too, and moves the HWM.
	writeFile(t, a, "data/n/1", "three")
	mustCommit(t, a, "three")
	if res := mustSync(t, b, SyncOptions{Fresh: true}); res.HWM != 3 {
		t.Fatalf("a fresh full sync: %+v; want hwm 3", res)
	}
}

// TestRegionOriginDown: with the origin out of reach, region B's host syncs
// from the mirror (saying the head is the mirror's, the origin unreachable)
// and its commit is refused with the way out, its files kept.
func TestRegionOriginDown(t *testing.T) {
	e := newRegionEnv(t)
	ctx := context.Background()
	a := e.host("a")
	writeFile(t, a, "data/m/1", "one")
	mustCommit(t, a, "one")
	e.waitMirror(1)
	e.r.Far.SetRefusing(true)
	e.r.Far.DropAll()
	e.r.Link.SetRefusing(true)
	e.r.Link.DropAll()
	c, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: e.r.FarURL()}, Read: natsjs.Endpoint{URL: e.r.Mirror.ClientURL()}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatalf("open with the origin down: %v", err)
	}
	b, err := Open(Config{Cache: t.TempDir(), Host: "b", Log: l, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res := mustSync(t, b, SyncOptions{})
	if res.HWM != 1 || res.Source == nil || res.Source.FromOrigin() {
		t.Fatalf("sync with the origin down: %+v; want hwm 1 from the mirror", res)
	}
	writeFile(t, b, "data/m/2", "mine")
	_, err = b.Commit(ctx, CommitOptions{Message: "mine"})
	var ou *natsjs.OriginUnreachableError
	if !errors.As(err, &ou) {
		t.Fatalf("commit with the origin down: %v; want an OriginUnreachableError", err)
	}
	if got, ok := readFile(t, b, "data/m/2"); !ok || got != "mine" {
		t.Fatalf("the refused commit's file: %q, %v", got, ok)
	}
	st, err := b.Status(ctx)
	if err != nil || len(st.Dirty) != 1 || st.Source == nil || !st.Source.OriginUnreachable {
		t.Fatalf("status with the origin down: %+v, %v; want the file dirty, the origin unreachable", st, err)
	}
}

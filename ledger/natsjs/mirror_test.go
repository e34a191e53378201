package natsjs

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// region is a ledger "test" on the origin of two regions, its mirror in
// region B, the origin's own Log (a writer in the origin's region), and a
// host of region B's Client (reads from the mirror, writes through Far).
type region struct {
	r      *natsjstest.Regions
	origin *Log    // a writer at the origin
	host   *Client // region B's: Read the mirror's server, Write the origin through Far
	log    *Log    // the host's log, read through the mirror
}

func newRegion(t *testing.T) *region {
	t.Helper()
	ctx := testCtx(t)
	r := natsjstest.RunRegions(t)
	onc := natsjstest.Connect(t, r.Origin.ClientURL())
	origin, err := CreateLog(ctx, onc, LedgerConfig{Name: "test", Blobs: "file:///tmp/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := Open(ctx, Config{Write: Endpoint{URL: r.Origin.ClientURL()}, Read: Endpoint{URL: r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.CreateMirror(ctx, "test", 1)
	if err != nil || !res.Created || res.Domain != natsjstest.MirrorDomain || res.OriginDomain != natsjstest.OriginDomain {
		t.Fatalf("CreateMirror = %+v, %v", res, err)
	}
	host, err := Open(ctx, Config{Write: Endpoint{URL: r.FarURL()}, Read: Endpoint{URL: r.Mirror.ClientURL()}, Name: "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	l, err := host.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.d.rep == nil {
		t.Fatal("region B's log does not read through the mirror")
	}
	return &region{r: r, origin: origin, host: host, log: l}
}

// waitMirror waits until the mirror holds seq.
func (g *region) waitMirror(t *testing.T, seq ledger.Seq) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, b, err := g.log.d.rep.state(testCtx(t))
		if err == nil && b.Last >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror did not reach seq %d: %v, %v", seq, b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCreateMirror: the admin's mirror is made in the read endpoint's
// domain, once; a second create finds it as wanted; a read endpoint in the
// origin's domain, or an origin without a domain, is refused.
func TestCreateMirror(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	admin, err := Open(ctx, Config{Write: Endpoint{URL: g.r.Origin.ClientURL()}, Read: Endpoint{URL: g.r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if res, err := admin.CreateMirror(ctx, "test", 1); err != nil || res.Created {
		t.Fatalf("CreateMirror again = %+v, %v; want it found as wanted", res, err)
	}
	// The origin's domain as the read endpoint: refused (the trap).
	same, err := Open(ctx, Config{Write: Endpoint{URL: g.r.Origin.ClientURL()}, Read: Endpoint{URL: g.r.Origin.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	if _, err := same.CreateMirror(ctx, "test", 1); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("CreateMirror in the origin's domain = %v, want ErrInvalid", err)
	}
	// An origin without a domain.
	plain, _ := natsjstest.RunServer(t)
	if _, err := CreateLog(ctx, natsjstest.Connect(t, plain.ClientURL()), LedgerConfig{Name: "test", Blobs: "file:///tmp/blobs"}); err != nil {
		t.Fatal(err)
	}
	nodomain, err := Open(ctx, Config{Write: Endpoint{URL: plain.ClientURL()}, Read: Endpoint{URL: g.r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer nodomain.Close()
	if _, err := nodomain.CreateMirror(ctx, "test", 1); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("CreateMirror of an origin without a domain = %v, want ErrInvalid", err)
	}
	// A mirror made otherwise (here: with an age of its own) is refused by
	// the host's open, naming mirror create.
	mnc := natsjstest.Connect(t, g.r.Mirror.ClientURL())
	js, _ := jetstream.New(mnc)
	if err := js.DeleteStream(ctx, StreamName("test")); err != nil {
		t.Fatal(err)
	}
	bad := mirrorConfig("test", natsjstest.OriginDomain, natsjstest.MirrorDomain, map[string]string{MetaName: "test", MetaUUID: g.origin.UUID(), MetaFormat: "1"}, 1)
	bad.MaxAge = time.Hour
	if _, err := js.CreateStream(ctx, bad); err != nil {
		t.Fatal(err)
	}
	_, err = g.host.Ledger("test").Log(ctx)
	var ce *ledger.ConfigError
	if !errors.As(err, &ce) || ce.Setting != "max_age" {
		t.Fatalf("open through a mirror with a max age = %v, want a ConfigError on max_age", err)
	}
}

// TestMirrorReads: what the mirror holds is read there — commits, partition
// heads, a partition's events, the head (named as the mirror's) — and the
// origin is not asked; the commits are the origin's, at its seqs, whole
// (the batch headers the mirror drops are not needed).
func TestMirrorReads(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	commitNext(t, g.origin, "a")
	seqs := commitNext(t, g.origin, "a", "b", "c")
	commitNext(t, g.origin, "b")
	want := readAll(t, g.origin, 1, 0)
	g.waitMirror(t, want[len(want)-1].Seq)
	<-g.log.d.rep.checked // the background check of the origin
	sent := g.host.w.Stats().OutMsgs
	got := readAll(t, g.log, 1, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d records through the mirror, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Event.Commit != want[i].Event.Commit || got[i].Event.Part != want[i].Event.Part || got[i].Event.Parts != want[i].Event.Parts {
			t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	checkChain(t, readPartition(t, g.log, "a", 1))
	if s, err := g.log.PartitionLastSeq(ctx, "b"); err != nil || s != 5 {
		t.Fatalf("PartitionLastSeq(b) = %d, %v; want 5", s, err)
	}
	if r, err := g.log.PartitionHead(ctx, "c"); err != nil || r.Seq != seqs[2] {
		t.Fatalf("PartitionHead(c) = %+v, %v; want seq %d", r, err, seqs[2])
	}
	h, err := g.log.Head(ctx, ledger.HeadRequest{Commit: true})
	if err != nil || h.Seq != 5 || h.FromOrigin() || h.Commit != want[4].Event.Commit || h.Mirror != "SYNCLEDGER_test in domain eu" {
		t.Fatalf("Head = %+v, %v; want seq 5 from the mirror in domain eu, its commit", h, err)
	}
	if n := g.host.w.Stats().OutMsgs - sent; n != 0 {
		t.Fatalf("reads within the mirror sent %d messages to the origin, want 0", n)
	}
	// The mirror's messages carry no batch headers: the commit is whole by
	// its parts.
	msg, err := g.host.r.Request(apiPrefix+"DIRECT.GET."+StreamName("test"), []byte(`{"seq":3}`), time.Second)
	if err != nil || msg.Header.Get("Nats-Batch-Id") != "" || msg.Header.Get(streamHeader) != StreamName("test") {
		t.Fatalf("the mirror's seq 3: %v, %v", msg.Header, err)
	}
	// The origin's head, asked of the origin.
	if h, err := g.log.Head(ctx, ledger.HeadRequest{Origin: true, Commit: true}); err != nil || h.Seq != 5 || !h.FromOrigin() || h.Commit != want[4].Event.Commit {
		t.Fatalf("Head(Origin) = %+v, %v", h, err)
	}
}

// TestMirrorReadsItsWrites: with the mirror stalled (the link between the
// regions holds everything), the host's own commit goes to the origin,
// checked there, and the host reads it at once: LastSeq, the partition's
// head, Read and ReadPartition include it (from the origin: the mirror does
// not hold it); the mirror's head stays behind, and says how old it is.
func TestMirrorReadsItsWrites(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	commitNext(t, g.origin, "a")
	g.waitMirror(t, 1)
	g.r.Link.Stall(true, true)
	defer g.r.Link.Resume()
	seqs := commitNext(t, g.log, "a", "b") // through the origin, chained on the mirror's head of a
	if seqs[0] != 2 {
		t.Fatalf("own commit at %v", seqs)
	}
	if s := lastSeq(t, g.log); s != 3 {
		t.Fatalf("LastSeq after the own commit = %d, want 3", s)
	}
	if s, err := g.log.PartitionLastSeq(ctx, "b"); err != nil || s != 3 {
		t.Fatalf("PartitionLastSeq(b) = %d, %v; want 3", s, err)
	}
	if rs := readAll(t, g.log, 1, 0); len(rs) != 3 {
		t.Fatalf("Read after the own commit: %v", seqsOf(rs))
	}
	checkChain(t, readPartition(t, g.log, "a", 1))
	// A stale chain is refused by the origin, whatever the mirror holds.
	_, err := g.log.Append(ctx, mkCommit(t, g.log, part{partition: "a", modelSeq: 2, prev: 1}))
	var conflict *ledger.ConflictError
	if !errors.As(err, &conflict) || conflict.Actual != 2 {
		t.Fatalf("a stale commit through the mirror = %v, want a conflict at 2", err)
	}
	// The head the host reports is its own commit's (the origin's word).
	h, err := g.log.Head(ctx, ledger.HeadRequest{})
	if err != nil || h.Seq != 3 || !h.FromOrigin() {
		t.Fatalf("Head = %+v, %v; want 3 from the origin (its own commit)", h, err)
	}
}

// TestMirrorLag: while the mirror is cut off, another host's commit at the
// origin is not in the mirror's head, which says how old it is; the
// origin's head (a stream info, no direct get) has it, and after it the
// partition's reads wait for the mirror, then read the rest from the origin.
func TestMirrorLag(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	commitNext(t, g.origin, "a")
	g.waitMirror(t, 1)
	g.r.Link.Stall(true, true)
	defer g.r.Link.Resume()
	seqs := commitNext(t, g.origin, "a")
	time.Sleep(1500 * time.Millisecond)
	h, err := g.log.Head(ctx, ledger.HeadRequest{})
	if err != nil || h.Seq != 1 || h.FromOrigin() || h.Staleness(time.Now()) < time.Second {
		t.Fatalf("the mirror's head while cut off = %+v, %v; want seq 1, more than 1 s old", h, err)
	}
	// Nothing new, as the mirror sees it: the hint a lock-holder must not trust.
	if s, err := g.log.PartitionLastSeq(ctx, "a"); err != nil || s != 1 {
		t.Fatalf("PartitionLastSeq(a) before the origin's head = %d, %v", s, err)
	}
	oh, err := g.log.Head(ctx, ledger.HeadRequest{Origin: true})
	if err != nil || oh.Seq != seqs[0] || !oh.FromOrigin() {
		t.Fatalf("Head(Origin) = %+v, %v", oh, err)
	}
	start := time.Now()
	if s, err := g.log.PartitionLastSeq(ctx, "a"); err != nil || s != seqs[0] {
		t.Fatalf("PartitionLastSeq(a) after the origin's head = %d, %v; want %d", s, err, seqs[0])
	}
	if d := time.Since(start); d < mirrorWait {
		t.Errorf("PartitionLastSeq read the origin after %v, without waiting for the mirror", d)
	}
	if rs := readPartition(t, g.log, "a", 1); len(rs) != 2 {
		t.Fatalf("ReadPartition(a) = %v", seqsOf(rs))
	}
	if rs := readAll(t, g.log, 1, 0); len(rs) != 2 {
		t.Fatalf("Read = %v", seqsOf(rs))
	}
	// Resumed, the mirror catches up, and is read again.
	g.r.Link.Resume()
	g.waitMirror(t, seqs[0])
	sent := g.host.w.Stats().OutMsgs
	if rs := readPartition(t, g.log, "a", 1); len(rs) != 2 {
		t.Fatalf("ReadPartition(a) after the mirror caught up = %v", seqsOf(rs))
	}
	if n := g.host.w.Stats().OutMsgs - sent; n != 0 {
		t.Fatalf("a read the mirror holds sent %d messages to the origin", n)
	}
}

// TestMirrorGapIsUnknown: seqs the mirror no longer holds (its own first
// seq moved past them: an admin purged the mirror) are not "deleted": the
// origin is asked, and gives them; only the origin's own truncation is one.
func TestMirrorGapIsUnknown(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	for range 4 {
		commitNext(t, g.origin, "a")
	}
	g.waitMirror(t, 4)
	mnc := natsjstest.Connect(t, g.r.Mirror.ClientURL())
	js, _ := jetstream.New(mnc)
	ms, err := js.Stream(ctx, StreamName("test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil {
		t.Fatal(err)
	}
	if rs := readAll(t, g.log, 1, 0); len(rs) != 4 {
		t.Fatalf("Read below the mirror's first seq = %v, want 1..4 (from the origin)", seqsOf(rs))
	}
	if rs := readPartition(t, g.log, "a", 1); len(rs) != 4 {
		t.Fatalf("ReadPartition below the mirror's first seq = %v, want 1..4", seqsOf(rs))
	}
	// The origin's own truncation is the answer.
	if _, err := g.origin.TruncateBefore(ctx, 3); err != nil {
		t.Fatal(err)
	}
	err = g.log.Read(ctx, 1, 0, func(ledger.Record) error { return nil })
	var te *ledger.TruncatedError
	if !errors.As(err, &te) {
		t.Fatalf("Read below the origin's first seq = %v, want a TruncatedError", err)
	}
}

// TestMirrorOriginDown: with the origin out of reach, reads go on from the
// mirror and say so (a head that is the mirror's, the origin unreachable),
// and a commit is refused at once with the way out, nothing published.
func TestMirrorOriginDown(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	commitNext(t, g.origin, "a")
	g.waitMirror(t, 1)
	g.r.Origin.Kill()
	host, err := Open(ctx, Config{Write: Endpoint{URL: g.r.FarURL()}, Read: Endpoint{URL: g.r.Mirror.ClientURL()}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Open with the origin down: %v", err)
	}
	defer host.Close()
	l, err := host.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatalf("open the log with the origin down: %v", err)
	}
	if rs := readAll(t, l, 1, 0); len(rs) != 1 {
		t.Fatalf("Read from the mirror with the origin down = %v", seqsOf(rs))
	}
	<-l.d.rep.checked
	h, err := l.Head(ctx, ledger.HeadRequest{})
	if err != nil || h.Seq != 1 || h.FromOrigin() || !h.OriginUnreachable {
		t.Fatalf("Head with the origin down = %+v, %v; want the mirror's, origin unreachable", h, err)
	}
	start := time.Now()
	_, err = l.Append(ctx, mkCommit(t, l, part{partition: "a", modelSeq: 2, prev: 1}))
	var ou *OriginUnreachableError
	if !errors.As(err, &ou) || !errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("Append with the origin down = %v, want an OriginUnreachableError", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refusal took %v", d)
	}
	g.r.Origin.Restart()
	if rs := readAll(t, g.origin, 1, 0); len(rs) != 1 {
		t.Fatalf("the origin holds %v after the refused commit", seqsOf(rs))
	}
	// The origin is back: the same Log (a long-lived host) checks it again
	// and writes, once its connection is up.
	deadline := time.Now().Add(20 * time.Second)
	for !l.d.rep.o.nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatalf("the write connection did not reconnect: %v", l.d.rep.o.nc.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	seqs, err := l.Append(ctx, mkCommit(t, l, part{partition: "a", modelSeq: 2, prev: 1}))
	if err != nil || seqs[0] != 2 {
		t.Fatalf("Append once the origin is back = %v, %v", seqs, err)
	}
}

// TestMirrorDirectGetTrap: a mirror in the origin's own domain joins the
// origin's direct-get group, and answers direct gets addressed to the
// origin under its own name: the Log takes no such answer (Nats-Stream
// names another stream), so every read is the origin's.
func TestMirrorDirectGetTrap(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	l, err := CreateLog(ctx, nc, LedgerConfig{Name: "test", Blobs: "file:///tmp/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		commitNext(t, l, "a")
	}
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SYNCLEDGER_test_trap", Storage: jetstream.FileStorage, AllowDirect: true,
		Mirror: &jetstream.StreamSource{Name: StreamName("test")}}); err != nil {
		t.Fatal(err)
	}
	// The trap is real on this server: once the mirror has caught up, some
	// direct gets addressed to the origin are answered by the mirror.
	byMirror, asked := 0, 0
	for deadline := time.Now().Add(20 * time.Second); byMirror == 0; asked++ {
		if time.Now().After(deadline) {
			t.Fatalf("in %d direct gets of the origin, the mirror in its domain never answered: the trap this test guards against is not reproduced", asked)
		}
		msg, err := nc.Request(apiPrefix+"DIRECT.GET."+StreamName("test"), []byte(`{"last_by_subj":"syncledger.test.p.a"}`), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Header.Get(streamHeader) == "SYNCLEDGER_test_trap" {
			byMirror++
		}
	}
	t.Logf("the mirror answered a direct get of the origin after %d requests", asked)
	// The Log's reads are the origin's all the same: commit more, and read
	// them at once (a mirror a moment behind would miss them).
	for range 20 {
		seqs := commitNext(t, l, "a")
		if s, err := l.PartitionLastSeq(ctx, "a"); err != nil || s != seqs[0] {
			t.Fatalf("PartitionLastSeq(a) right after seq %d = %d, %v", seqs[0], s, err)
		}
		if r, err := l.PartitionHead(ctx, "a"); err != nil || r.Seq != seqs[0] {
			t.Fatalf("PartitionHead(a) right after seq %d = %+v, %v", seqs[0], r, err)
		}
	}
	checkChain(t, readPartition(t, l, "a", 1))
}

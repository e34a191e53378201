package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

func TestCreateOpen(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	const uuid = "6f1c2a4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f"

	if _, err := OpenLog(ctx, nc, "ledger1"); !errors.Is(err, ledger.ErrNoLedger) || !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("OpenLog(missing) = %v, want ErrNoLedger (the CLI's way out names syncledger init)", err)
	}

	l, err := CreateLog(ctx, nc, LedgerConfig{Name: "ledger1", UUID: uuid, Blobs: "s3://bucket/prefix", MaxAge: 0})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if l.Name() != "ledger1" || l.UUID() != uuid || l.Stream() != "SYNCLEDGER_ledger1" {
		t.Fatalf("Create: name %q uuid %q stream %q", l.Name(), l.UUID(), l.Stream())
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	want := ledger.Info{Name: "ledger1", UUID: uuid, Format: ledger.LogFormat, Blobs: "s3://bucket/prefix", Replicas: 1}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Fatalf("Info (-want +got):\n%s", diff)
	}

	// Idempotent: no preference, or the same settings, open the existing ledger.
	for _, cfg := range []LedgerConfig{
		{Name: "ledger1"},
		{Name: "ledger1", UUID: uuid, Blobs: "s3://bucket/prefix"},
		{Name: "ledger1", Replicas: 1, MaxAge: time.Hour}, // existing settings win
	} {
		l2, err := CreateLog(ctx, nc, cfg)
		if err != nil {
			t.Fatalf("CreateLog(%+v) again: %v", cfg, err)
		}
		if l2.UUID() != uuid {
			t.Fatalf("CreateLog(%+v) again: uuid %s, want the existing %s", cfg, l2.UUID(), uuid)
		}
	}
	s, err := l.d.js.Stream(ctx, l.Stream())
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if c.MaxAge != 0 || !c.DenyDelete || !c.AllowDirect || !c.AllowAtomicPublish || c.Storage != jetstream.FileStorage ||
		c.Discard != jetstream.DiscardOld || c.Duplicates != DuplicateWindow || !cmp.Equal(c.Subjects, []string{"syncledger.ledger1.p.>"}) {
		t.Fatalf("stream config: %+v", c)
	}

	// Conflicting settings name both values.
	other := "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b"
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "ledger1", UUID: other}); !errors.Is(err, ledger.ErrInvalid) ||
		!strings.Contains(err.Error(), uuid) || !strings.Contains(err.Error(), other) {
		t.Fatalf("CreateLog(conflicting uuid) = %v, want ErrInvalid naming both", err)
	}
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "ledger1", Blobs: "gs://other"}); !errors.Is(err, ledger.ErrInvalid) ||
		!strings.Contains(err.Error(), "s3://bucket/prefix") || !strings.Contains(err.Error(), "gs://other") {
		t.Fatalf("CreateLog(conflicting blobs) = %v, want ErrInvalid naming both", err)
	}

	l3, err := OpenLog(ctx, nc, "ledger1")
	if err != nil || l3.UUID() != uuid {
		t.Fatalf("Open = %v, %v; want uuid %s", l3, err, uuid)
	}

	// A generated lineage is a v4 UUID.
	g, err := CreateLog(ctx, nc, LedgerConfig{Name: "ledger2"})
	if err != nil {
		t.Fatalf("CreateLog(ledger2): %v", err)
	}
	if err := ledger.ValidateUUID(g.UUID()); err != nil || g.UUID()[14] != '4' {
		t.Fatalf("generated uuid %q (%v), want a v4 UUID", g.UUID(), err)
	}

	for _, cfg := range []LedgerConfig{{Name: "bad.name"}, {Name: ""}, {Name: "x", UUID: "nope"}, {Name: "x", Replicas: 7}} {
		if _, err := CreateLog(ctx, nc, cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("CreateLog(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}

	if err := g.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := OpenLog(ctx, nc, "ledger2"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("OpenLog(deleted) = %v, want ErrNotFound", err)
	}
	if _, err := g.LastSeq(ctx); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("LastSeq(deleted) = %v, want ErrNotFound", err)
	}
}

// Hosts creating the same ledger at once all end up with the one lineage.
func TestConcurrentCreate(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	var (
		wg    sync.WaitGroup
		uuids [8]string
		errs  [8]error
	)
	for i := range uuids {
		wg.Go(func() {
			l, err := CreateLog(ctx, natsjstest.Connect(t, nc.ConnectedUrl()), LedgerConfig{Name: "shared", Blobs: "file:///b"})
			if err == nil {
				uuids[i] = l.UUID()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range uuids {
		if errs[i] != nil || uuids[i] != uuids[0] {
			t.Fatalf("Create %d: %s, %v; want %s", i, uuids[i], errs[i], uuids[0])
		}
	}
}

func TestOpenForeignStreams(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	md := func(format string) map[string]string { // name filled in below
		return map[string]string{MetaUUID: "6f1c2a4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f", MetaFormat: format}
	}
	for i, tc := range []struct {
		cfg  jetstream.StreamConfig
		want error
	}{
		{jetstream.StreamConfig{}, ledger.ErrInvalid}, // no metadata
		{jetstream.StreamConfig{AllowDirect: true, AllowAtomicPublish: true, Metadata: md("3")}, ledger.ErrUnknownVersion},
		{jetstream.StreamConfig{AllowDirect: true, Metadata: md("1")}, ledger.ErrInvalid}, // no atomic publish
		{jetstream.StreamConfig{AllowDirect: true, AllowAtomicPublish: true, Metadata: md("one")}, ledger.ErrInvalid},
	} {
		name := fmt.Sprintf("x%d", i) // a stream name is not reused at once: deletion is asynchronous
		tc.cfg.Name, tc.cfg.Subjects = ledger.StreamName(name), []string{ledger.SubjectPrefix(name) + ">"}
		if tc.cfg.Metadata != nil {
			tc.cfg.Metadata[MetaName] = name
		}
		if _, err := js.CreateStream(ctx, tc.cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenLog(ctx, nc, name); !errors.Is(err, tc.want) {
			t.Errorf("OpenLog(stream %+v) = %v, want %v", tc.cfg, err, tc.want)
		}
		if _, err := CreateLog(ctx, nc, LedgerConfig{Name: name}); !errors.Is(err, tc.want) {
			t.Errorf("CreateLog(over stream %+v) = %v, want %v", tc.cfg, err, tc.want)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	for _, o := range []Option{WithTimeout(0), WithRetry(0, time.Second), WithRetry(1, -1)} {
		if _, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: "x"}, o); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("bad option: %v, want ErrInvalid", err)
		}
	}
	if _, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: "x"}, WithTimeout(time.Second), WithRetry(2, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
}

func TestChain(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)

	b, err := l.Bounds(ctx)
	if err != nil || b != (ledger.Bounds{First: 1, Last: 0}) {
		t.Fatalf("Bounds(empty) = %+v, %v; want {1 0}", b, err)
	}
	if s, err := l.PartitionLastSeq(ctx, "m"); s != 0 || err != nil {
		t.Fatalf("PartitionLastSeq(empty) = %d, %v", s, err)
	}
	if _, err := l.PartitionHead(ctx, "m"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("PartitionHead(empty) = %v, want ErrNotFound", err)
	}
	if rs := readAll(t, l, 1, 0); len(rs) != 0 {
		t.Fatalf("Read(empty) = %v", rs)
	}

	var want []ledger.Seq
	for i := 1; i <= 3; i++ {
		want = append(want, commitNext(t, l, "m")...)
		commitNext(t, l, "other") // interleave another partition
	}
	if !cmp.Equal(want, []ledger.Seq{1, 3, 5}) {
		t.Fatalf("seqs %v, want [1 3 5]", want)
	}
	rs := readPartition(t, l, "m", 1)
	if !cmp.Equal(seqsOf(rs), want) {
		t.Fatalf("ReadPartition seqs %v, want %v", seqsOf(rs), want)
	}
	checkChain(t, rs)
	if got := seqsOf(readPartition(t, l, "m", 2)); !cmp.Equal(got, []ledger.Seq{3, 5}) {
		t.Fatalf("ReadPartition(from 2) = %v", got)
	}
	if got := readPartition(t, l, "m", 6); len(got) != 0 {
		t.Fatalf("ReadPartition(from 6) = %v", got)
	}
	all := readAll(t, l, 0, 0)
	if got := seqsOf(all); !cmp.Equal(got, []ledger.Seq{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("Read = %v", got)
	}
	for _, r := range all {
		if !r.LastOfCommit() || r.Event.Ledger != l.UUID() {
			t.Fatalf("record %+v", r)
		}
	}
	if got := seqsOf(readAll(t, l, 2, 4)); !cmp.Equal(got, []ledger.Seq{2, 3, 4}) {
		t.Fatalf("Read(2, 4) = %v", got)
	}
	if got := seqsOf(readAll(t, l, 5, 100)); !cmp.Equal(got, []ledger.Seq{5, 6}) {
		t.Fatalf("Read(5, 100) = %v", got)
	}
	if got := readAll(t, l, 7, 0); len(got) != 0 {
		t.Fatalf("Read(7) = %v", got)
	}

	h, err := l.PartitionHead(ctx, "m")
	if err != nil || h.Seq != 5 || h.Event.ModelSeq != 3 || h.Event.Prev != 3 || h.Event.Partition != "m" {
		t.Fatalf("PartitionHead = %+v, %v", h, err)
	}
	if s, err := l.PartitionLastSeq(ctx, "m"); s != 5 || err != nil {
		t.Fatalf("PartitionLastSeq = %d, %v", s, err)
	}
	if s := lastSeq(t, l); s != 6 {
		t.Fatalf("LastSeq = %d", s)
	}
	if b, err := l.Bounds(ctx); err != nil || b != (ledger.Bounds{First: 1, Last: 6}) {
		t.Fatalf("Bounds = %+v, %v", b, err)
	}

	// fn's error stops a read and is returned as is.
	stop := errors.New("stop")
	n := 0
	if err := l.Read(ctx, 1, 0, func(ledger.Record) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Read with failing fn = %v after %d records", err, n)
	}
	if err := l.ReadPartition(ctx, "m", 1, func(ledger.Record) error { return stop }); err != stop {
		t.Fatalf("ReadPartition with failing fn = %v", err)
	}

	// A decoded record equals what was appended.
	evs := mkCommit(t, l, next(t, l, "m"))
	seqs, err := l.Append(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.PartitionHead(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ledger.Record{Seq: seqs[0], Event: evs[0]}, got); diff != "" {
		t.Fatalf("head (-appended +read):\n%s", diff)
	}
}

// Reads that span more than one batched direct get.
func TestReadManyBatches(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	const singles, wide = directBatchSize + 14, 50
	b := part{partition: "b", modelSeq: 1}
	for i := range singles {
		seqs, err := l.Append(ctx, mkCommit(t, l, b))
		if err != nil {
			t.Fatal(err)
		}
		b.modelSeq, b.prev = b.modelSeq+1, seqs[0]
		if i%50 == 0 { // now and then a wide commit
			ps := make([]string, wide)
			for j := range ps {
				ps[j] = fmt.Sprintf("w%02d", j)
			}
			commitNext(t, l, ps...)
		}
	}
	total := singles + (singles+49)/50*wide
	rs := readAll(t, l, 1, 0)
	if len(rs) != total {
		t.Fatalf("Read: %d records, want %d", len(rs), total)
	}
	for i, r := range rs {
		if r.Seq != ledger.Seq(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	pb := readPartition(t, l, "b", 1)
	if len(pb) != singles {
		t.Fatalf("ReadPartition: %d records, want %d", len(pb), singles)
	}
	checkChain(t, pb)
	if got := readPartition(t, l, "b", pb[100].Seq); len(got) != singles-100 || got[0].Seq != pb[100].Seq {
		t.Fatalf("ReadPartition from the 101st: %d records from seq %d", len(got), got[0].Seq)
	}
}

// Read reads ahead on a goroutine of its own: an error from fn, a cancelled
// context and a bound inside a batch each end the read where they should, and
// Read returns only once the read-ahead stopped (its subscription is gone).
func TestReadStops(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	const n = 3*directBatchSize + 7
	b := part{partition: "b", modelSeq: 1}
	for range n {
		seqs, err := l.Append(ctx, mkCommit(t, l, b))
		if err != nil {
			t.Fatal(err)
		}
		b.modelSeq, b.prev = b.modelSeq+1, seqs[0]
	}
	subs := l.d.nc.NumSubscriptions()
	boom := errors.New("boom")
	got := 0
	err := l.Read(ctx, 1, 0, func(r ledger.Record) error {
		if got++; r.Seq == directBatchSize+5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || got != directBatchSize+5 {
		t.Fatalf("Read with fn failing at seq %d: %v after %d records", directBatchSize+5, err, got)
	}
	if l.d.nc.NumSubscriptions() != subs {
		t.Fatalf("%d subscriptions after Read returned, %d before", l.d.nc.NumSubscriptions(), subs)
	}

	cctx, cancel := context.WithCancel(ctx)
	got = 0
	err = l.Read(cctx, 1, 0, func(r ledger.Record) error {
		if got++; got == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || got == n {
		t.Fatalf("Read cancelled after 10 records: %v after %d of %d records", err, got, n)
	}
	if l.d.nc.NumSubscriptions() != subs {
		t.Fatalf("%d subscriptions after a cancelled Read, %d before", l.d.nc.NumSubscriptions(), subs)
	}

	for _, to := range []ledger.Seq{1, 100, directBatchSize, directBatchSize + 1, n} {
		rs := readAll(t, l, 1, to)
		if len(rs) != int(to) || rs[len(rs)-1].Seq != to {
			t.Fatalf("Read to %d: %d records", to, len(rs))
		}
	}
	if rs := readAll(t, l, n+1, 0); len(rs) != 0 {
		t.Fatalf("Read past the end: %d records", len(rs))
	}
}

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

// After a purge below seq 5, reads from below the first seq are refused with a
// TruncatedError; reads from the first seq on work.
func TestTruncated(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	for range 4 {
		commitNext(t, l, "m", "n") // seqs 1..8
	}
	s, err := l.d.js.Stream(ctx, l.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(5)); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Bounds(ctx); err != nil || b != (ledger.Bounds{First: 5, Last: 8}) {
		t.Fatalf("Bounds = %+v, %v", b, err)
	}
	called := false
	fn := func(ledger.Record) error { called = true; return nil }
	want := &ledger.TruncatedError{From: 1, First: 5}
	check := func(what string, err error) {
		t.Helper()
		var te *ledger.TruncatedError
		if !errors.As(err, &te) || !errors.Is(err, ledger.ErrTruncated) || *te != *want || called {
			t.Fatalf("%s = %v (fn called: %v), want %v", what, err, called, want)
		}
	}
	check("Read(1)", l.Read(ctx, 1, 0, fn))
	check("Read(0)", l.Read(ctx, 0, 0, fn))
	check("ReadPartition(1)", l.ReadPartition(ctx, "m", 1, fn))
	want.From = 4
	check("Read(4, 6)", l.Read(ctx, 4, 6, fn))
	check("ReadPartition(4)", l.ReadPartition(ctx, "n", 4, fn))
	check("Follow(4)", l.Follow(ctx, 4, fn))

	if got := seqsOf(readAll(t, l, 5, 0)); !cmp.Equal(got, []ledger.Seq{5, 6, 7, 8}) {
		t.Fatalf("Read(5) = %v", got)
	}
	if got := seqsOf(readPartition(t, l, "m", 5)); !cmp.Equal(got, []ledger.Seq{5, 7}) {
		t.Fatalf("ReadPartition(m, 5) = %v", got)
	}
	// The partition's chain still extends from its head.
	if seqs := commitNext(t, l, "m"); seqs[0] != 9 {
		t.Fatalf("append after purge: %v", seqs)
	}

	// Everything purged: the empty log's first seq is last+1.
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Bounds(ctx); err != nil || b != (ledger.Bounds{First: 10, Last: 9}) {
		t.Fatalf("Bounds(purged) = %+v, %v", b, err)
	}
	want.From, want.First = 9, 10
	check("Read(9)", l.Read(ctx, 9, 0, fn))
	if err := l.Read(ctx, 10, 0, fn); err != nil || called {
		t.Fatalf("Read(10) on the emptied log = %v", err)
	}
}

// A partition's events purged by subject leave a hole inside the stream: reads
// report it, never skip it.
func TestHoleInPartition(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	commitNext(t, l, "n") // 1
	for range 3 {
		commitNext(t, l, "m") // 2, 3, 4
	}
	commitNext(t, l, "n") // 5
	s, err := l.d.js.Stream(ctx, l.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(ledger.Subject("test", "m")), jetstream.WithPurgeSequence(4)); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Bounds(ctx); err != nil || b.First != 1 {
		t.Fatalf("Bounds = %+v, %v; want first seq 1", b, err)
	}
	nop := func(ledger.Record) error { return nil }
	if err := l.ReadPartition(ctx, "m", 1, nop); !errors.Is(err, ledger.ErrTruncated) || !strings.Contains(err.Error(), "seq 4 follows seq 3") {
		t.Fatalf("ReadPartition over a hole = %v, want ErrTruncated naming seqs 4 and 3", err)
	}
	if err := l.Read(ctx, 1, 0, nop); !errors.Is(err, ledger.ErrTruncated) || !strings.Contains(err.Error(), "2..3") {
		t.Fatalf("Read over a hole = %v, want ErrTruncated naming seqs 2..3", err)
	}
	if got := seqsOf(readPartition(t, l, "m", 4)); !cmp.Equal(got, []ledger.Seq{4}) {
		t.Fatalf("ReadPartition(m, 4) = %v", got)
	}
}

// Messages published raw on a partition subject: a read stops at them with an
// error naming the seq.
func TestMalformedMessages(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	valid := mkCommit(t, l, part{partition: "m", modelSeq: 1})[0]
	otherLedger := valid
	otherLedger.Ledger = "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b"
	for i, tc := range []struct {
		name    string
		subject string
		data    []byte
		want    error
	}{
		{"garbage", ledger.Subject("test", "m"), []byte("not json"), ledger.ErrInvalid},
		{"unknown field", ledger.Subject("test", "m"), []byte(strings.Replace(string(mustEncode(t, valid)), `{"v":1,`, `{"v":1,"x":1,`, 1)), ledger.ErrInvalid},
		{"version 2", ledger.Subject("test", "m"), []byte(`{"v":2,"whatever":true}`), ledger.ErrUnknownVersion},
		{"wrong partition", ledger.Subject("test", "n"), mustEncode(t, valid), ledger.ErrInvalid},
		{"bad token", ledger.SubjectPrefix("test") + "a~2e", mustEncode(t, valid), ledger.ErrInvalid},
		{"other lineage", ledger.Subject("test", "m"), mustEncode(t, otherLedger), ledger.ErrLineage},
	} {
		ack, err := js.Publish(ctx, tc.subject, tc.data)
		if err != nil {
			t.Fatalf("%s: publish: %v", tc.name, err)
		}
		seq := ledger.Seq(ack.Sequence)
		if seq != ledger.Seq(i+1) {
			t.Fatalf("%s: stored at %d", tc.name, seq)
		}
		err = l.Read(ctx, seq, 0, func(ledger.Record) error { return nil })
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", seq)) {
			t.Errorf("%s: Read = %v, want %v naming seq %d", tc.name, err, tc.want, seq)
		}
		err = l.Follow(ctx, seq, func(ledger.Record) error { return nil })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Follow = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := l.PartitionHead(ctx, "m"); !errors.Is(err, ledger.ErrLineage) {
		t.Errorf("PartitionHead = %v, want ErrLineage", err)
	}
	if err := l.ReadPartition(ctx, "m", 1, func(ledger.Record) error { return nil }); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("ReadPartition = %v, want ErrInvalid", err)
	}
}

// Partition keys with characters that mean something in subjects round-trip,
// and no partition's reads see another's events.
func TestEscapedPartitions(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	keys := []string{"a", "a.b", "a.*", "a.>", "*", ">", "sp ace", "tab\tx", "$sys", "ümlaut", "日本", "a~2Eb", "~", "a-b_c"}
	// Keys with a tab are not valid paths; skip what ValidatePath refuses.
	var used []string
	for _, k := range keys {
		if ledger.ValidatePath(pathIn(k, 1)) != nil || ledger.PartitionKey(pathIn(k, 1)) != k {
			continue
		}
		used = append(used, k)
	}
	if len(used) < 12 {
		t.Fatalf("only %d usable keys: %q", len(used), used)
	}
	seqOf := map[string]ledger.Seq{}
	for _, k := range used {
		seqOf[k] = commitNext(t, l, k)[0]
	}
	seqs := commitNext(t, l, used...) // one commit over all of them
	for i, k := range used {
		rs := readPartition(t, l, k, 1)
		if got, want := seqsOf(rs), []ledger.Seq{seqOf[k], seqs[i]}; !cmp.Equal(got, want) {
			t.Errorf("ReadPartition(%q) = %v, want %v", k, got, want)
		}
		for _, r := range rs {
			if r.Event.Partition != k {
				t.Errorf("ReadPartition(%q) returned partition %q", k, r.Event.Partition)
			}
		}
		if s, err := l.PartitionLastSeq(ctx, k); s != seqs[i] || err != nil {
			t.Errorf("PartitionLastSeq(%q) = %d, %v; want %d", k, s, err, seqs[i])
		}
	}
	// A partition that has no events is not matched by any other's subject.
	for _, k := range []string{"a.c", "b", "a."} {
		if s, err := l.PartitionLastSeq(ctx, k); s != 0 || err != nil {
			t.Errorf("PartitionLastSeq(%q) = %d, %v; want 0", k, s, err)
		}
	}
}

func TestFollow(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	commitNext(t, l, "m")
	commitNext(t, l, "m", "n")

	fctx, cancel := context.WithCancel(ctx)
	var (
		mu  sync.Mutex
		got []ledger.Seq
		wg  sync.WaitGroup
		err error
	)
	wg.Go(func() {
		err = l.Follow(fctx, 2, func(r ledger.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r.Seq)
			return nil
		})
	})
	for range 5 {
		commitNext(t, l, "n")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Follow delivered %d records", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow = %v, want context.Canceled", err)
	}
	if want := []ledger.Seq{2, 3, 4, 5, 6, 7, 8}; !cmp.Equal(got, want) {
		t.Fatalf("Follow delivered %v, want %v", got, want)
	}

	// fn's error stops Follow and is returned as is.
	stop := errors.New("stop")
	n := 0
	if err := l.Follow(ctx, 1, func(ledger.Record) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Follow with failing fn = %v after %d", err, n)
	}
	// Follow leaves no consumer behind (its delete request is not waited for).
	s, err := l.d.js.Stream(ctx, l.Stream())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := s.Info(ctx)
		if err == nil && info.State.Consumers == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumers left after Follow returned (%v)", err)
		}
	}
}

// TestOpenAnswersFirstLastSeq: the first LastSeq soon after Open answers from
// Open's own stream info request (a no-op sync makes one request); any later
// call, one after a write through the Log, and one after openFresh ask the
// server, and every answer is the stream's last seq as of that request or
// Open's.
func TestOpenAnswersFirstLastSeq(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	l, nc := newLedger(t)
	commitNext(t, l, "a") // seq 1
	watch := natsjstest.Connect(t, nc.ConnectedUrl())
	infos, err := watch.SubscribeSync("$JS.API.STREAM.INFO." + l.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	requests := func() int {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := watch.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := infos.Pending()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// expect checks LastSeq's answer and whether it asked the server.
	expect := func(o *Log, want ledger.Seq, asks bool) {
		t.Helper()
		before := requests()
		got, err := o.LastSeq(ctx)
		if err != nil || got != want {
			t.Fatalf("LastSeq = %d, %v; want %d", got, err, want)
		}
		if n := requests() - before; n != map[bool]int{false: 0, true: 1}[asks] {
			t.Fatalf("LastSeq made %d stream info requests, want asks=%v", n, asks)
		}
	}

	// Without WithOpenSeq every LastSeq asks (a long-lived process, such
	// as the swamp agent, takes a lock and then syncs).
	o, err := OpenLog(ctx, nc, l.Name())
	if err != nil {
		t.Fatal(err)
	}
	expect(o, 1, true)

	if o, err = OpenLog(ctx, nc, l.Name(), WithOpenSeq()); err != nil {
		t.Fatal(err)
	}
	expect(o, 1, false)   // Open's answer
	expect(o, 1, true)    // asked again
	commitNext(t, l, "a") // seq 2, through another Log
	expect(o, 2, true)

	if o, err = OpenLog(ctx, nc, l.Name(), WithOpenSeq()); err != nil {
		t.Fatal(err)
	}
	commitNext(t, o, "b") // seq 3, through this Log: Open's answer is stale
	expect(o, 3, true)

	if o, err = OpenLog(ctx, nc, l.Name(), WithOpenSeq()); err != nil {
		t.Fatal(err)
	}
	commitNext(t, l, "a") // seq 4, elsewhere
	time.Sleep(openFresh)
	expect(o, 4, true) // too old to answer
}

package natsjs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// following runs Follow from seq 1 on its own goroutine; fn, when set, runs
// before each delivery is recorded.
type following struct {
	got    chan ledger.Seq
	done   chan error
	cancel context.CancelFunc
}

func follow(t *testing.T, l *Log, fn func(ledger.Record)) *following {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	f := &following{got: make(chan ledger.Seq, 1024), done: make(chan error, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		f.done <- l.Follow(ctx, 1, func(r ledger.Record) error {
			if fn != nil {
				fn(r)
			}
			f.got <- r.Seq
			return nil
		})
	}()
	return f
}

// want waits up to within for seqs first..last, in order.
func (f *following) want(t *testing.T, first, last ledger.Seq, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for seq := first; seq <= last; seq++ {
		select {
		case s := <-f.got:
			if s != seq {
				t.Fatalf("Follow delivered seq %d, want %d", s, seq)
			}
		case err := <-f.done:
			t.Fatalf("Follow returned %v, want seq %d", err, seq)
		case <-timer.C:
			t.Fatalf("Follow delivered nothing within %v; want seq %d", within, seq)
		}
	}
}

// TestFollowSlowConsumer: a follower whose fn is slow while commits pour in
// has the client drop republished messages past its pending limit (a slow
// consumer); it delivers every record all the same, in order, without
// waiting for its idle check.
func TestFollowSlowConsumer(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "slow"}); err != nil {
		t.Fatal(err)
	}
	var slow atomic.Int32
	fc, err := nats.Connect(srv.ClientURL(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			slow.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	l, err := OpenLog(ctx, fc, "slow", WithFollowIdle(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	l.d.opts.followPending = 4
	w, err := OpenLog(ctx, nc, "slow")
	if err != nil {
		t.Fatal(err)
	}
	commitNext(t, w, "a")
	release := make(chan struct{})
	f := follow(t, l, func(r ledger.Record) {
		if r.Seq == 2 {
			<-release
		}
	})
	f.want(t, 1, 1, 10*time.Second)
	for range 40 {
		commitNext(t, w, "a", "b")
	}
	if err := fc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the republish reaches the follower's full buffer
	close(release)
	f.want(t, 2, 81, 10*time.Second)
	if slow.Load() == 0 {
		t.Fatal("the client dropped nothing: the test did not exercise a slow consumer")
	}
	commitNext(t, w, "c")
	f.want(t, 82, 82, 10*time.Second)
}

// TestFollowReconnect: a follower whose connection is down while commits are
// stored misses their republish; it reads them once it has reconnected, in
// order, without waiting for its idle check, and follows on.
func TestFollowReconnect(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	w, err := CreateLog(ctx, nc, LedgerConfig{Name: "rc"})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faulty.NewProxy(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	fc := natsjstest.Connect(t, proxy.URL())
	l, err := OpenLog(ctx, fc, "rc", WithFollowIdle(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	commitNext(t, w, "a")
	f := follow(t, l, nil)
	f.want(t, 1, 1, 10*time.Second)
	proxy.SetRefusing(true)
	proxy.DropAll()
	for range 5 {
		commitNext(t, w, "a")
	}
	proxy.SetRefusing(false)
	f.want(t, 2, 6, 10*time.Second)
	commitNext(t, w, "b")
	f.want(t, 7, 7, 10*time.Second)
}

// TestFollowIgnoresForgedHeaders: a message stored with headers that claim
// another seq and another partition (a host may publish any headers) is
// never delivered as what they claim: the follower reads the stream, whose
// leader states where the message is, and refuses it as the partition's
// event it is not.
func TestFollowIgnoresForgedHeaders(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	w, err := CreateLog(ctx, nc, LedgerConfig{Name: "forge"}, WithFollowIdle(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	commitNext(t, w, "a")
	delivered := make(chan ledger.Record, 16)
	f := follow(t, w, func(r ledger.Record) { delivered <- r })
	f.want(t, 1, 1, 10*time.Second)
	<-delivered

	// Partition a's next event, stored on partition b's subject with
	// headers claiming partition a's subject and a seq.
	evs := mkCommit(t, w, part{partition: "a", modelSeq: 2, prev: 1})
	for _, seq := range []string{"2", "7"} {
		s := nats.NewMsg(ledger.Subject("forge", "b"))
		s.Header.Set("Nats-Stream", StreamName("forge"))
		s.Header.Set("Nats-Sequence", seq)
		s.Header.Set("Nats-Subject", ledger.Subject("forge", "a"))
		s.Data = mustEncode(t, evs[0])
		if _, err := w.d.js.PublishMsg(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-f.done:
		if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "seq 2") {
			t.Fatalf("Follow = %v, want the message at seq 2 refused (ErrInvalid)", err)
		}
		t.Logf("Follow: %v", err)
	case r := <-delivered:
		t.Fatalf("Follow delivered %+v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("Follow neither delivered nor failed")
	}
	// Read and ReadPartition see it where it is too.
	err = w.Read(ctx, 2, 0, func(r ledger.Record) error { return fmt.Errorf("delivered %+v", r) })
	if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "seq 2") {
		t.Fatalf("Read = %v, want the message at seq 2 refused (ErrInvalid)", err)
	}
	var got []ledger.Seq
	if err := w.ReadPartition(ctx, "a", 1, func(r ledger.Record) error { got = append(got, r.Seq); return nil }); err != nil || len(got) != 1 || got[0] != 1 {
		t.Fatalf("ReadPartition(a) = %v, %v; want seq 1 only", got, err)
	}
	if s, err := w.PartitionLastSeq(ctx, "b"); err != nil || s != 3 {
		t.Fatalf("PartitionLastSeq(b) = %d, %v; want 3", s, err)
	}
	// The way out: the admin quarantines both, and followers pass them.
	for _, seq := range []ledger.Seq{2, 3} {
		if _, err := w.Quarantine(ctx, ledger.Quarantine{Seq: seq, Reason: "forged headers", By: "admin", At: time.Now()}, true); err != nil {
			t.Fatalf("Quarantine(%d): %v", seq, err)
		}
	}
	commitNext(t, w, "a")
	var recs []ledger.Record
	err = w.Follow(ctx, 1, func(r ledger.Record) error {
		recs = append(recs, r)
		if r.Seq == 6 {
			return errStop
		}
		return nil
	})
	if err != errStop || len(recs) != 6 || recs[1].Skip == nil || recs[2].Skip == nil || recs[5].Event.Partition != "a" {
		t.Fatalf("Follow after the quarantine = %v, %+v", err, recs)
	}
}

var errStop = errors.New("stop")

// TestFollowFromPastTheHead: a follower asked to start past the stream's
// head waits for that seq (as tail --from does), delivering nothing before
// it.
func TestFollowFromPastTheHead(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t, WithFollowIdle(100*time.Millisecond))
	commitNext(t, l, "a")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	got := make(chan ledger.Seq, 8)
	done := make(chan error, 1)
	go func() { done <- l.Follow(ctx, 4, func(r ledger.Record) error { got <- r.Seq; return nil }) }()
	commitNext(t, l, "a")
	commitNext(t, l, "a")
	time.Sleep(300 * time.Millisecond) // idle checks pass meanwhile
	commitNext(t, l, "a")
	select {
	case s := <-got:
		if s != 4 {
			t.Fatalf("Follow(4) delivered seq %d first", s)
		}
	case err := <-done:
		t.Fatalf("Follow(4) = %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Follow(4) delivered nothing")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel = %v", err)
	}
}

// TestFollowRewound: a stream whose last seq goes below what a follower
// delivered (recreated, or restored from an old backup, under the same
// lineage) stops the follower with ErrRewound at its next head check.
func TestFollowRewound(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t, WithFollowIdle(100*time.Millisecond))
	ctx := testCtx(t)
	for range 3 {
		commitNext(t, l, "a")
	}
	f := follow(t, l, nil)
	f.want(t, 1, 3, 10*time.Second)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, l.d.stream); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, l.d.streamConfig(LedgerConfig{Name: l.d.name, Blobs: "file:///tmp/blobs"}, l.d.uuid)); err != nil {
		t.Fatal(err)
	}
	commitNext(t, l, "a")
	select {
	case err := <-f.done:
		if !errors.Is(err, ledger.ErrRewound) {
			t.Fatalf("Follow = %v, want ErrRewound", err)
		}
	case s := <-f.got:
		t.Fatalf("Follow delivered seq %d", s)
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not notice the rewind")
	}
}

// TestFollowReadsTheRepublish: once caught up, a follower takes new records
// from the stream's republish alone — no request of its own per commit — so
// a fleet of followers costs the server one republish a message, not a read
// each.
func TestFollowReadsTheRepublish(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	w, err := CreateLog(ctx, nc, LedgerConfig{Name: "rp"})
	if err != nil {
		t.Fatal(err)
	}
	fc := natsjstest.Connect(t, srv.ClientURL())
	l, err := OpenLog(ctx, fc, "rp", WithFollowIdle(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	seqs := commitNext(t, w, "a")
	f := follow(t, l, nil)
	f.want(t, 1, 1, 10*time.Second)

	spy := natsjstest.Connect(t, srv.ClientURL())
	var reads atomic.Int32
	for _, subj := range []string{apiPrefix + "DIRECT.GET.>", apiPrefix + "STREAM.INFO.>", apiPrefix + "STREAM.MSG.GET.>"} {
		if _, err := spy.Subscribe(subj, func(*nats.Msg) { reads.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	// Appends that read nothing: each commit's prev is known here.
	p := part{partition: "a", modelSeq: 2, prev: seqs[0]}
	for range 20 {
		got, err := w.Append(ctx, mkCommit(t, w, p))
		if err != nil {
			t.Fatal(err)
		}
		p.modelSeq, p.prev = p.modelSeq+1, got[0]
	}
	f.want(t, 2, 21, 10*time.Second)
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := reads.Load(); n != 0 {
		t.Fatalf("20 commits cost %d reads (the follower's or the appends'), want 0", n)
	}
}

// TestHiddenHeaders: a message published raw with a header block that holds
// a blank line — nats.go's parser stops there, so the headers the server
// adds after it are hidden and the publisher's own (one each of stream,
// subject and seq, naming partition a) show instead — is read where the
// stream holds it, on partition b's subject, by Read and by Follow.
func TestHiddenHeaders(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	w, err := CreateLog(ctx, nc, LedgerConfig{Name: "hid"}, WithFollowIdle(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	commitNext(t, w, "a")
	delivered := make(chan ledger.Record, 16)
	f := follow(t, w, func(r ledger.Record) { delivered <- r })
	f.want(t, 1, 1, 10*time.Second)
	<-delivered

	body := mustEncode(t, mkCommit(t, w, part{partition: "a", modelSeq: 2, prev: 1})[0])
	hdr := "NATS/1.0\r\nNats-Stream: " + StreamName("hid") + "\r\nNats-Subject: " + ledger.Subject("hid", "a") +
		"\r\nNats-Sequence: 2\r\nNats-Time-Stamp: 2026-01-01T00:00:00Z\r\n\r\nX: y\r\n\r\n"
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"headers\":true,\"protocol\":1}\r\nHPUB %s %d %d\r\n%s%s\r\nPING\r\n",
		ledger.Subject("hid", "b"), len(hdr), len(hdr)+len(body), hdr, body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "PONG") {
		t.Fatalf("raw publish: %q, %v", line, err)
	}
	select {
	case err := <-f.done:
		if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "seq 2") {
			t.Fatalf("Follow = %v, want the message at seq 2 refused (ErrInvalid)", err)
		}
	case r := <-delivered:
		t.Fatalf("Follow delivered %+v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("Follow neither delivered nor failed")
	}
	err = w.Read(ctx, 1, 0, func(r ledger.Record) error {
		if r.Seq == 2 {
			return fmt.Errorf("delivered %+v", r)
		}
		return nil
	})
	if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "seq 2") || !strings.Contains(err.Error(), `partition "b"`) {
		t.Fatalf("Read = %v, want the message at seq 2 refused as partition b's", err)
	}
}

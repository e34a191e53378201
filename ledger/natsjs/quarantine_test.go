package natsjs

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// A quarantined message is part of no chain: Read hands it out as a skipped
// record (and the notice too), ReadPartition not at all, the partition's next event names the event
// before it as prev and Append expects the message on the server's side; an
// event among the messages after Prev is still a conflict.
func TestQuarantine(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t)
	ctx := testCtx(t)
	a1 := commitNext(t, l, "audit")[0]
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ledger.Subject("test", "audit"), []byte(`{"v":1`))
	if err != nil {
		t.Fatal(err)
	}
	bad := ledger.Seq(ack.Sequence)
	var re *ledger.RecordError
	if err := l.Read(ctx, 1, 0, func(ledger.Record) error { return nil }); !errors.As(err, &re) || re.Seq != bad {
		t.Fatalf("Read over the bad message = %v, want a RecordError at seq %d", err, bad)
	}
	a2 := mkCommit(t, l, part{partition: "audit", modelSeq: 2, prev: a1})
	if _, err := l.Append(ctx, a2); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("Append after an unquarantined message = %v, want a conflict", err)
	}
	q := ledger.Quarantine{Seq: bad, Reason: "truncated", By: "admin", At: time.Now()}
	notice, err := l.Quarantine(ctx, q, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Quarantine(ctx, q, false); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second quarantine = %v", err)
	}
	if ps, err := l.Partitions(ctx); err != nil || !slices.Equal(ps, []string{"audit"}) {
		t.Fatalf("Partitions with a quarantine notice = %q, %v; want [audit]", ps, err)
	}
	if _, err := l.Quarantine(ctx, ledger.Quarantine{Seq: notice, Reason: "x", By: "admin", At: time.Now()}, true); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("quarantine of a notice = %v", err)
	}
	if _, err := l.Quarantine(ctx, ledger.Quarantine{Seq: a1, Reason: "x", By: "admin", At: time.Now()}, false); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("quarantine of a well-formed event without force = %v", err)
	}
	seqs, err := l.Append(ctx, a2)
	if err != nil {
		t.Fatalf("Append past the quarantined message: %v", err)
	}
	rs := readAll(t, l, 1, 0)
	if !slices.Equal(seqsOf(rs), []ledger.Seq{a1, bad, notice, seqs[0]}) || rs[1].Skip == nil || rs[1].Skip.Partition != "audit" || rs[1].Skip.Notice ||
		rs[2].Skip == nil || !rs[2].Skip.Notice || rs[2].Skip.Quarantine.Seq != bad || rs[3].Skip != nil || rs[3].Event.Prev != a1 {
		t.Fatalf("Read = %+v", rs)
	}
	if ps := readPartition(t, l, "audit", 1); !slices.Equal(seqsOf(ps), []ledger.Seq{a1, seqs[0]}) {
		t.Fatalf("ReadPartition = %v", seqsOf(ps))
	}

	// Another bad message, quarantined, after a real event another host
	// appended: an append on the older prev is a conflict still.
	other := commitNext(t, l, "audit")[0]
	if ack, err = js.Publish(ledger.Subject("test", "audit"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Quarantine(ctx, ledger.Quarantine{Seq: ledger.Seq(ack.Sequence), Reason: "empty", By: "admin", At: time.Now()}, false); err != nil {
		t.Fatal(err)
	}
	var cf *ledger.ConflictError
	if _, err := l.Append(ctx, mkCommit(t, l, part{partition: "audit", modelSeq: 3, prev: seqs[0]})); !errors.As(err, &cf) || cf.Actual != ledger.Seq(ack.Sequence) {
		t.Fatalf("Append on a prev with an event after it = %v, want a conflict", err)
	}
	if head, err := l.PartitionHead(ctx, "audit"); err != nil || head.Seq != other {
		t.Fatalf("PartitionHead = %d, %v; want the last event %d", head.Seq, err, other)
	}
	commitNext(t, l, "audit")
	qs, err := l.Quarantines(ctx)
	if err != nil || len(qs) != 2 || qs[bad].Reason != "truncated" {
		t.Fatalf("Quarantines = %v, %v", qs, err)
	}
}

// TestQuarantinePreempted: a host publishes first under every message id a
// quarantine notice of the next seqs could carry ("quarantine/<seq>", what
// it was before its nonce); the admin's quarantine is stored all the same,
// and readers skip the message.
func TestQuarantinePreempted(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t)
	ctx := testCtx(t)
	commitNext(t, l, "audit")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, ledger.Subject("test", "audit"), []byte(`{"v":1`))
	if err != nil {
		t.Fatal(err)
	}
	bad := ledger.Seq(ack.Sequence)
	for _, id := range []string{fmt.Sprintf("quarantine/%d", bad), fmt.Sprintf("quarantine/%d.x", bad)} {
		ev := mkCommit(t, l, next(t, l, "other"))[0]
		if _, err := js.Publish(ctx, ledger.Subject("test", "other"), mustEncode(t, ev), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	notice, err := l.Quarantine(ctx, ledger.Quarantine{Seq: bad, Reason: "truncated", By: "admin", At: time.Now()}, false)
	if err != nil {
		t.Fatal(err)
	}
	m, ok, err := l.d.leaderGet(ctx, msgGetRequest{Seq: uint64(notice)})
	if err != nil || !ok || m.Subject != ledger.QuarantineSubject("test") {
		t.Fatalf("the notice at seq %d: %+v %v %v", notice, m, ok, err)
	}
	skipped := false
	for _, r := range readAll(t, l, 1, 0) {
		skipped = skipped || r.Seq == bad && r.Skip != nil && !r.Skip.Notice
	}
	if !skipped {
		t.Fatalf("seq %d not skipped after the notice", bad)
	}
}

package natsjs

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

func TestTruncateBeforeKeepsPartitionHeads(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	// seqs: a1 b1 a2 c1 a3 b2 a4 a5 (a: 5 events, b: 2, c: 1)
	for _, p := range []string{"a", "b", "a", "c", "a", "b", "a", "a"} {
		commitNext(t, l, p)
	}
	dropped, err := l.TruncateBefore(ctx, 7)
	if err != nil {
		t.Fatalf("TruncateBefore: %v (purge must stay allowed on a DenyDelete stream)", err)
	}
	// a: 1,3,5 dropped (7,8 stay); b: 1 dropped, 6 is its head below 7: kept;
	// c: 4 is its only event: kept.
	if dropped != 4 {
		t.Errorf("dropped %d events, want 4", dropped)
	}
	b, err := l.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.First != 4 || b.Last != 8 {
		t.Errorf("bounds %+v, want first 4 (c's head), last 8", b)
	}
	if n, err := l.TruncateBefore(ctx, 7); err != nil || n != 0 {
		t.Errorf("second TruncateBefore(7) = %d, %v; want idempotent", n, err)
	}
	// Reads from the bound on are whole; reads below it meet a hole: ErrTruncated.
	if got := seqsOf(readAll(t, l, 6, 0)); !cmp.Equal(got, []ledger.Seq{6, 7, 8}) {
		t.Errorf("read from 6 (a kept head, then whole): %v", got)
	}
	for _, from := range []ledger.Seq{1, 4, 5} {
		err := l.Read(ctx, from, 0, func(ledger.Record) error { return nil })
		if !errors.Is(err, ledger.ErrTruncated) {
			t.Errorf("Read from %d: %v, want ErrTruncated", from, err)
		}
	}
	err = l.ReadPartition(ctx, "a", 4, func(ledger.Record) error { return nil })
	if !errors.Is(err, ledger.ErrTruncated) {
		t.Errorf("ReadPartition(a, 4): %v, want ErrTruncated", err)
	}
	// Every chain can still be extended from its head, and an emptied-chain
	// restart (Prev 0) is refused because no subject was emptied.
	for _, p := range []string{"a", "b", "c"} {
		commitNext(t, l, p)
	}
	_, err = l.Append(ctx, mkCommit(t, l, part{partition: "b", modelSeq: 1}))
	if !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("append restarting b's chain: %v, want ErrConflict", err)
	}
	// Once the heads moved on, the old heads go too.
	if n, err := l.TruncateBefore(ctx, 7); err != nil || n != 2 {
		t.Errorf("TruncateBefore(7) after new heads = %d, %v; want 2 (b's 6, c's 4)", n, err)
	}
	if n, err := l.TruncateBefore(ctx, 1); err != nil || n != 0 {
		t.Errorf("TruncateBefore(1) = %d, %v", n, err)
	}
}

//go:build failpoints

package natsjs

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// These tests inject faults into Append through the Log's failpoints; they run
// with -tags failpoints (.ci/run runs them).

// Inside one Append: the ack of the first attempts is lost; Append resolves the
// outcome by reading and returns the stored seqs without storing twice.
func TestLostAckInsideAppend(t *testing.T) {
	l, _ := newLedger(t, WithRetry(4, time.Millisecond))
	ctx := testCtx(t)
	var attempts []int
	l.d.faults.onAck = func(attempt int) bool { attempts = append(attempts, attempt); return true }
	for _, partitions := range [][]string{{"s"}, {"a", "b", "c"}} {
		attempts = nil
		before := lastSeq(t, l)
		parts := make([]part, len(partitions))
		for i, p := range partitions {
			parts[i] = next(t, l, p)
		}
		seqs, err := l.Append(ctx, mkCommit(t, l, parts...))
		if err != nil {
			t.Fatalf("%v: Append: %v", partitions, err)
		}
		want := make([]ledger.Seq, len(partitions))
		for i := range want {
			want[i] = before + ledger.Seq(i+1)
		}
		if !cmp.Equal(seqs, want) || !cmp.Equal(attempts, []int{1}) {
			t.Fatalf("%v: seqs %v after attempts %v; want %v after one attempt", partitions, seqs, attempts, want)
		}
		if s := lastSeq(t, l); s != want[len(want)-1] {
			t.Fatalf("%v: last seq %d, want %d", partitions, s, want[len(want)-1])
		}
	}
}

// Attempts that never reach the server (a timeout, no responders during a
// leader election) are retried; attempts that keep failing end in
// ErrOutcomeUnknown, with nothing stored.
func TestTransientErrors(t *testing.T) {
	l, _ := newLedger(t, WithRetry(3, time.Millisecond))
	ctx := testCtx(t)
	var attempts []int
	l.d.faults.onSend = func(attempt int) error {
		attempts = append(attempts, attempt)
		switch attempt {
		case 1:
			return nats.ErrTimeout
		case 2:
			return nats.ErrNoResponders
		}
		return nil
	}
	seqs, err := l.Append(ctx, mkCommit(t, l, next(t, l, "a"), next(t, l, "b")))
	if err != nil || !cmp.Equal(seqs, []ledger.Seq{1, 2}) || !cmp.Equal(attempts, []int{1, 2, 3}) {
		t.Fatalf("Append = %v, %v after attempts %v; want [1 2] after 3", seqs, err, attempts)
	}

	attempts = nil
	l.d.faults.onSend = func(attempt int) error { attempts = append(attempts, attempt); return nats.ErrTimeout }
	_, err = l.Append(ctx, mkCommit(t, l, next(t, l, "a")))
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, nats.ErrTimeout) || !cmp.Equal(attempts, []int{1, 2, 3}) {
		t.Fatalf("Append = %v after attempts %v; want ErrOutcomeUnknown after 3", err, attempts)
	}
	if s := lastSeq(t, l); s != 2 {
		t.Fatalf("last seq %d, want 2", s)
	}

	// A refusal is final at once.
	attempts = nil
	l.d.faults.onSend = func(attempt int) error {
		attempts = append(attempts, attempt)
		return &jetstream.APIError{Code: 400, ErrorCode: codeBatchTooLarge, Description: "atomic publish batch is too large: 1000"}
	}
	_, err = l.Append(ctx, mkCommit(t, l, next(t, l, "a"), next(t, l, "b")))
	if !errors.Is(err, ledger.ErrTooLarge) || !cmp.Equal(attempts, []int{1}) {
		t.Fatalf("Append = %v after attempts %v; want ErrTooLarge after 1", err, attempts)
	}
}

// An earlier attempt still in flight lands while Append resolves a later one:
// the partitions' moved heads are its own commit, not a conflict.
func TestLateLandingAttempt(t *testing.T) {
	l, _ := newLedger(t, WithRetry(3, time.Millisecond))
	ctx := testCtx(t)
	for _, partitions := range [][]string{{"s"}, {"a", "b", "c"}} {
		parts := make([]part, len(partitions))
		for i, p := range partitions {
			parts[i] = next(t, l, p)
		}
		evs := mkCommit(t, l, parts...)
		c, err := prepareCommit(l, evs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var landed []ledger.Seq
		l.d.faults.onSend = func(attempt int) error {
			if attempt == 1 {
				return nats.ErrTimeout // sent, but not arrived yet
			}
			return nil
		}
		l.d.faults.onPartOneAbsent = func() {
			if landed == nil { // now it arrives
				if landed, err = l.d.publish(ctx, c); err != nil {
					t.Errorf("late publish: %v", err)
				}
			}
		}
		seqs, err := l.Append(ctx, evs)
		if err != nil || !cmp.Equal(seqs, landed) {
			t.Fatalf("%v: Append = %v, %v; want the late attempt's %v", partitions, seqs, err, landed)
		}
		if s := lastSeq(t, l); s != landed[len(landed)-1] {
			t.Fatalf("%v: last seq %d, want %d", partitions, s, landed[len(landed)-1])
		}
	}
}

// A fenced commit whose ack is lost, and whose lock another holder takes
// before Append resolves the outcome: the commit was stored while the fence
// held, so Append returns its seqs — not a lost lock, and nothing twice. An
// attempt whose commit never arrived, resolved after the lock passed, is a
// lost lock: nothing stored.
func TestLostAckFenced(t *testing.T) {
	l, _ := newLedger(t, WithRetry(4, time.Millisecond))
	ctx := testCtx(t)
	take := func(host string) ledger.Fence {
		t.Helper()
		id := mkCommit(t, l, part{partition: "x", modelSeq: 1})[0].Commit
		seq, err := l.TakeFence(ctx, ledger.FenceRecord{V: ledger.FormatVersion, Ledger: l.d.uuid, Lock: "m", ID: id, Host: host, At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return ledger.Fence{Lock: "m", Seq: seq}
	}
	fa := take("a")
	var attempts []int
	l.d.faults.onAck = func(attempt int) bool {
		attempts = append(attempts, attempt)
		take("b") // between the store and Append's resolution
		return true
	}
	before := lastSeq(t, l)
	seqs, err := l.Append(ctx, mkCommit(t, l, next(t, l, "a"), next(t, l, "b")), fa)
	if err != nil || !cmp.Equal(seqs, []ledger.Seq{before + 1, before + 2}) || !cmp.Equal(attempts, []int{1}) {
		t.Fatalf("fenced Append whose ack was lost = %v, %v after attempts %v; want [%d %d] after one", seqs, err, attempts, before+1, before+2)
	}
	// The batch (2 events, 1 fence check) and b's fence record.
	if s := lastSeq(t, l); s != before+4 {
		t.Fatalf("last seq %d, want %d", s, before+4)
	}

	l.d.faults.onAck = nil
	l.d.faults.onSend = func(attempt int) error {
		if attempt == 1 {
			take("c") // the lock passes while the first attempt is lost
			return nats.ErrTimeout
		}
		return nil
	}
	before = lastSeq(t, l)
	_, err = l.Append(ctx, mkCommit(t, l, next(t, l, "a")), fa)
	var le *ledger.LockLostError
	if !errors.As(err, &le) || le.Taker == nil || le.Taker.Host != "c" || errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("fenced Append resolved after the lock passed = %v, want a LockLostError naming host c", err)
	}
	if s := lastSeq(t, l); s != before+1 {
		t.Fatalf("last seq %d, want %d (c's fence record only)", s, before+1)
	}
}

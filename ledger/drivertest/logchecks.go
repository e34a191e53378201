package drivertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// countingLog counts the calls of its driver's methods that may make a
// request (every one but Info).
type countingLog struct {
	ledger.LogDriver
	n atomic.Int64
}

func (c *countingLog) count() { c.n.Add(1) }

func (c *countingLog) LastSeq(ctx context.Context) (ledger.Seq, error) {
	c.count()
	return c.LogDriver.LastSeq(ctx)
}

func (c *countingLog) Bounds(ctx context.Context) (ledger.Bounds, error) {
	c.count()
	return c.LogDriver.Bounds(ctx)
}

func (c *countingLog) Head(ctx context.Context, req ledger.HeadRequest) (ledger.Head, error) {
	c.count()
	return c.LogDriver.Head(ctx, req)
}

func (c *countingLog) PartitionLastSeq(ctx context.Context, p string) (ledger.Seq, error) {
	c.count()
	return c.LogDriver.PartitionLastSeq(ctx, p)
}

func (c *countingLog) PartitionTip(ctx context.Context, p string) (ledger.Seq, string, error) {
	c.count()
	return c.LogDriver.PartitionTip(ctx, p)
}

func (c *countingLog) PartitionHead(ctx context.Context, p string) (ledger.Record, error) {
	c.count()
	return c.LogDriver.PartitionHead(ctx, p)
}

func (c *countingLog) CommitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	c.count()
	return c.LogDriver.CommitAt(ctx, seq)
}

func (c *countingLog) Append(ctx context.Context, b *ledger.AppendBatch) ([]ledger.Seq, error) {
	c.count()
	return c.LogDriver.Append(ctx, b)
}

func (c *countingLog) TakeFence(ctx context.Context, rec ledger.FenceRecord, data []byte) (ledger.Seq, error) {
	c.count()
	return c.LogDriver.TakeFence(ctx, rec, data)
}

func (c *countingLog) Read(ctx context.Context, from, to ledger.Seq, fn func(ledger.Record) error) error {
	c.count()
	return c.LogDriver.Read(ctx, from, to, fn)
}

func (c *countingLog) ReadPartition(ctx context.Context, p string, from ledger.Seq, fn func(ledger.Record) error) error {
	c.count()
	return c.LogDriver.ReadPartition(ctx, p, from, fn)
}

func (c *countingLog) Follow(ctx context.Context, from ledger.Seq, fn func(ledger.Record) error) error {
	c.count()
	return c.LogDriver.Follow(ctx, from, fn)
}

func (c *countingLog) Quarantines(ctx context.Context) (map[ledger.Seq]ledger.Quarantine, error) {
	c.count()
	return c.LogDriver.Quarantines(ctx)
}

func (c *countingLog) Quarantine(ctx context.Context, q ledger.Quarantine, force bool) (ledger.Seq, error) {
	c.count()
	return c.LogDriver.Quarantine(ctx, q, force)
}

func (c *countingLog) TruncateBefore(ctx context.Context, before ledger.Seq) (uint64, error) {
	c.count()
	return c.LogDriver.TruncateBefore(ctx, before)
}

func (c *countingLog) Attested(ctx context.Context) (ledger.Attestations, error) {
	c.count()
	return c.LogDriver.Attested(ctx)
}

func (c *countingLog) AttestSnapshot(ctx context.Context, seq ledger.Seq, sum ledger.Digest) error {
	c.count()
	return c.LogDriver.AttestSnapshot(ctx, seq, sum)
}

func (c *countingLog) AttestRetention(ctx context.Context, before ledger.Seq) error {
	c.count()
	return c.LogDriver.AttestRetention(ctx, before)
}

func (c *countingLog) SetRetention(ctx context.Context, before ledger.Seq) error {
	c.count()
	return c.LogDriver.SetRetention(ctx, before)
}

// testLogRefusedBeforeDriver: what the portable log checks once — a done
// context, a commit CheckAppend refuses, a fence record of another lineage,
// a notice that does not encode, an attestation of nothing, a truncation
// below seq 2 — it refuses (or answers) without calling the driver.
func testLogRefusedBeforeDriver(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	good := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1})
	rec := logFenceRecord(t, ctx, l, "lock", "host-a")
	done, cancel := context.WithCancel(ctx)
	cancel()
	noop := func(ledger.Record) error { return nil }
	dc := []struct {
		name string
		call func() error
	}{
		{"Info", func() error { _, err := l.Info(done); return err }},
		{"LastSeq", func() error { _, err := l.LastSeq(done); return err }},
		{"Bounds", func() error { _, err := l.Bounds(done); return err }},
		{"Head", func() error { _, err := l.Head(done, ledger.HeadRequest{}); return err }},
		{"PartitionLastSeq", func() error { _, err := l.PartitionLastSeq(done, "a"); return err }},
		{"PartitionTip", func() error { _, _, err := l.PartitionTip(done, "a"); return err }},
		{"PartitionHead", func() error { _, err := l.PartitionHead(done, "a"); return err }},
		{"CommitAt", func() error { _, err := l.CommitAt(done, 1); return err }},
		{"Append", func() error { _, err := l.Append(done, good); return err }},
		{"TakeFence", func() error { _, err := l.TakeFence(done, rec); return err }},
		{"Read", func() error { return l.Read(done, 1, 0, noop) }},
		{"ReadPartition", func() error { return l.ReadPartition(done, "a", 1, noop) }},
		{"Follow", func() error { return l.Follow(done, 1, noop) }},
		{"Quarantines", func() error { _, err := l.Quarantines(done); return err }},
		{"Quarantine", func() error { _, err := l.Quarantine(done, quarantine(1), true); return err }},
		{"TruncateBefore", func() error { _, err := l.TruncateBefore(done, 5); return err }},
		{"Attested", func() error { _, err := l.Attested(done); return err }},
		{"AttestSnapshot", func() error { return l.AttestSnapshot(done, 1, ledger.DigestOf([]byte("s"))) }},
		{"AttestRetention", func() error { return l.AttestRetention(done, 1) }},
		{"SetRetention", func() error { return l.SetRetention(done, 1) }},
	}
	for _, c := range dc {
		if err := c.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a done context = %v, want context.Canceled", c.name, err)
		}
	}
	if n := f.calls.n.Load(); n != 0 {
		t.Errorf("the driver was called %d times for a done context, want none", n)
	}

	other := rec
	other.Ledger = "00000000-0000-4000-8000-000000000000"
	badNotice := quarantine(1)
	badNotice.Reason = ""
	refused := []struct {
		name string
		call func() error
		want error
	}{
		{"Append no events", func() error { _, err := l.Append(ctx, nil); return err }, ledger.ErrInvalid},
		{"Append parts out of order", func() error {
			e := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1}, logPart{partition: "b", modelSeq: 1})
			e[0].Part, e[1].Part = 2, 1
			_, err := l.Append(ctx, e)
			return err
		}, ledger.ErrInvalid},
		{"Append of another lineage", func() error {
			e := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1})
			e[0].Ledger = other.Ledger
			_, err := l.Append(ctx, e)
			return err
		}, ledger.ErrLineage},
		{"Append of an event that does not encode", func() error {
			e := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1})
			e[0].Host = ""
			_, err := l.Append(ctx, e)
			return err
		}, ledger.ErrInvalid},
		{"TakeFence of another lineage", func() error { _, err := l.TakeFence(ctx, other); return err }, ledger.ErrLineage},
		{"Quarantine without a reason", func() error { _, err := l.Quarantine(ctx, badNotice, true); return err }, ledger.ErrInvalid},
		{"AttestSnapshot of seq 0", func() error { return l.AttestSnapshot(ctx, 0, ledger.DigestOf([]byte("s"))) }, ledger.ErrInvalid},
		{"AttestSnapshot of a zero digest", func() error { return l.AttestSnapshot(ctx, 1, ledger.Digest{}) }, ledger.ErrInvalid},
	}
	for _, c := range refused {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s = %v, want %v", c.name, err, c.want)
		}
	}
	if dropped, err := l.TruncateBefore(ctx, 1); dropped != 0 || err != nil {
		t.Errorf("TruncateBefore(1) = %d, %v; want 0, nil", dropped, err)
	}
	if n := f.calls.n.Load(); n != 0 {
		t.Errorf("the driver was called %d times for what the portable log refuses, want none", n)
	}
	wantBounds(t, ctx, l, 1, 0)
}

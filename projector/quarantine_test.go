package projector

import (
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// quarantined is the record the log hands out for a quarantined message of
// partition data--m--<p> ("" for a notice).
func quarantined(seq ledger.Seq, p string, notice bool) ledger.Record {
	sk := &ledger.Skip{Notice: notice, Quarantine: ledger.Quarantine{Seq: seq}}
	if p != "" {
		sk.Partition = "data--m--" + p
	}
	return ledger.Record{Seq: seq, Skip: sk}
}

// A skipped record (a quarantined message, a quarantine notice) applies
// nothing, counts as processed so the HWM passes it, and moves its
// partition's mark to its seq so that the partition's next event (prev = that
// seq) applies; in a scoped read it moves the mark but never the HWM.
func TestSkippedRecords(t *testing.T) {
	c := newCore(t, baseState(), Config{})
	steps := []struct {
		rec  ledger.Record
		want Verdict
	}{
		{quarantined(6, "a", false), Skip},   // a bad message on a's subject
		{rec("a", 7, 3, 6, "a3"), Apply},     // a's next event names it as prev
		{quarantined(8, "new", false), Skip}, // the first message of a new partition's subject
		{rec("new", 9, 1, 8, "n1"), Apply},   // its first event: modelSeq 1, prev 8
		{quarantined(10, "", true), Skip},    // the notice
	}
	for _, s := range steps {
		if v, err := c.Step(Full, s.rec); err != nil || v != s.want {
			t.Fatalf("Step seq %d = %v, %v; want %v", s.rec.Seq, v, err, s.want)
		}
	}
	rd := c.Ready()
	if rd.HWM != 10 || rd.Marks["data--m--a"] != (Mark{3, 7}) || rd.Marks["data--m--new"] != (Mark{1, 9}) || len(rd.Changes) != 2 {
		t.Fatalf("Ready = %+v", rd)
	}
	if err := c.Advance(rd); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c.State(), Config{}); err != nil {
		t.Fatalf("state after skips does not validate: %v", err)
	}

	// Scoped: the mark moves (modelSeq kept), the HWM does not.
	c = newCore(t, baseState(), Config{})
	if v, err := c.Step(Scoped, quarantined(6, "b", false)); err != nil || v != Skip {
		t.Fatalf("scoped Step = %v, %v", v, err)
	}
	if v, err := c.Classify(Scoped, quarantined(6, "b", false)); err != nil || v != Skip {
		t.Fatalf("Classify = %v, %v", v, err)
	}
	rd = c.Ready()
	if rd.HWM != 5 || rd.Marks["data--m--b"] != (Mark{1, 6}) {
		t.Fatalf("scoped Ready = %+v", rd)
	}
}

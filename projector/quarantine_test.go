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
// nothing, is part of no chain (the partition's next event names the event
// before it as prev), and counts as processed so the HWM passes it; in a
// scoped read it changes nothing.
func TestSkippedRecords(t *testing.T) {
	c := newCore(t, baseState(), Config{})
	steps := []struct {
		rec  ledger.Record
		want Verdict
	}{
		{quarantined(6, "a", false), Skip}, // a bad message on a's subject
		{rec("a", 7, 3, 5, "a3"), Apply},   // a's next event follows a's previous one
		{quarantined(8, "new", false), Skip},
		{rec("new", 9, 1, 0, "n1"), Apply}, // a new partition's first event
		{quarantined(10, "", true), Skip},  // the notice
	}
	for _, s := range steps {
		if v, err := c.Step(Full, s.rec); err != nil || v != s.want {
			t.Fatalf("Step seq %d = %v, %v; want %v", s.rec.Seq, v, err, s.want)
		}
	}
	rd := c.Ready()
	if rd.HWM != 10 || rd.Marks["data--m--a"] != (Mark{3, 7}) || rd.Marks["data--m--new"] != (Mark{1, 9}) || len(rd.Marks) != 2 || len(rd.Changes) != 2 {
		t.Fatalf("Ready = %+v", rd)
	}
	c.Advance(rd)

	// Scoped: nothing staged. Classify agrees.
	c = newCore(t, baseState(), Config{})
	if v, err := c.Step(Scoped, quarantined(6, "b", false)); err != nil || v != Skip || c.HasReady() {
		t.Fatalf("scoped Step = %v, %v (staged: %v)", v, err, c.HasReady())
	}
	if v, err := c.Classify(Full, quarantined(6, "b", false)); err != nil || v != Skip {
		t.Fatalf("Classify = %v, %v", v, err)
	}
}

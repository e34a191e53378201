package projector

import (
	"errors"
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
	rd := c.mustReady()
	if rd.HWM != 10 || rd.Marks["data--m--a"] != (Mark{3, 7}) || rd.Marks["data--m--new"] != (Mark{1, 9}) || len(rd.Marks) != 2 || len(rd.Changes) != 2 {
		t.Fatalf("Ready = %+v", rd)
	}
	c.persistAdvance(rd)

	// Scoped: nothing staged. Classify agrees.
	c = newCore(t, baseState(), Config{})
	if v, err := c.Step(Scoped, quarantined(6, "b", false)); err != nil || v != Skip || c.HasReady() {
		t.Fatalf("scoped Step = %v, %v (staged: %v)", v, err, c.HasReady())
	}
	if v, err := c.Classify(Full, quarantined(6, "b", false)); err != nil || v != Skip {
		t.Fatalf("Classify = %v, %v", v, err)
	}
}

// A lock's fence records and a fenced commit's checks (ledger.Fence) are
// skipped records of no partition: processed, each a commit of its own, so
// the HWM passes them in a full read and a scoped read changes nothing. The
// host's own fenced commit counts its checks as processed (RecordOwn), and
// where the commit did not start at HWM+1 the HWM passes them all once the
// full read fills the hole before it.
func TestFenceRecords(t *testing.T) {
	fence := func(seq ledger.Seq) ledger.Record {
		return ledger.Record{Seq: seq, Skip: &ledger.Skip{Fence: &ledger.FenceRecord{Lock: "data/m/a/.lock"}}}
	}
	check := func(seq ledger.Seq) ledger.Record {
		return ledger.Record{Seq: seq, Skip: &ledger.Skip{Check: &ledger.FenceCheck{Lock: "data/m/a/.lock", Fence: 6}}}
	}
	c := newCore(t, baseState(), Config{})
	if v, err := c.Step(Scoped, fence(6)); err != nil || v != Skip || c.HasReady() {
		t.Fatalf("scoped Step of a fence record = %v, %v (staged: %v)", v, err, c.HasReady())
	}
	for _, r := range []ledger.Record{fence(6), rec("a", 7, 3, 5, "a3"), check(8)} {
		if _, err := c.Step(Full, r); err != nil {
			t.Fatalf("Step seq %d: %v", r.Seq, err)
		}
	}
	rd := c.mustReady()
	if rd.HWM != 8 || rd.Marks["data--m--a"] != (Mark{3, 7}) {
		t.Fatalf("Ready = %+v, want HWM 8 past the fence record and check", rd)
	}
	c.persistAdvance(rd)

	// This host's own fence record at 9 (it took a lock after its last
	// sync), another host's at 10, unread; its own commit at 11 under the
	// fence of 9, its check at 12. The HWM passes 9, its own, and stops
	// before 10; reading 10 moves it to 12.
	own := rec("b", 11, 2, 3, "b2")
	if err := c.RecordOwn([]ledger.Event{own.Event}, []ledger.Seq{11}, ledger.Fence{Lock: "data/m/b/.lock", Seq: 9}); err != nil {
		t.Fatal(err)
	}
	if rd := c.mustReady(); rd.HWM != 9 {
		t.Fatalf("own fenced commit after an unread seq: HWM %d, want 9 (its own fence record)", rd.HWM)
	}
	c.persistAdvance(c.mustReady())
	if _, err := c.Step(Full, fence(10)); err != nil {
		t.Fatal(err)
	}
	if rd := c.mustReady(); rd.HWM != 12 {
		t.Fatalf("the hole read: HWM %d, want 12 (the own commit and its fence check)", rd.HWM)
	}
	c.persistAdvance(c.mustReady())
	// A fence that is not a record before the commit is no fence of it.
	next := rec("b", 13, 3, 11, "b3")
	if err := c.RecordOwn([]ledger.Event{next.Event}, []ledger.Seq{13}, ledger.Fence{Lock: "l", Seq: 13}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("RecordOwn with a fence at the commit's seq = %v, want ErrInvalid", err)
	}
}

// A commit's parts that lie (part 1/2 with no part 2) show at the next record,
// which starts a commit: the error names the event that lies as the culprit,
// the seq to quarantine; once it is skipped, the next commit applies.
func TestPartsErrorNamesCulprit(t *testing.T) {
	c := newCore(t, baseState(), Config{})
	liar := part(rec("a", 6, 3, 5, "a3"), 99, 1, 2)
	if _, err := c.Step(Full, liar); err != nil {
		t.Fatal(err)
	}
	var pe *PartsError
	if _, err := c.Step(Full, rec("b", 7, 2, 3, "b2")); !errors.As(err, &pe) || pe.Seq != 7 || pe.Culprit != 6 || !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Step after a lying part 1/2 = %v, want a PartsError naming seq 6", err)
	}
	c.Discard()
	// A part 2 right after the HWM lies itself.
	if _, err := c.Step(Full, part(rec("b", 6, 2, 3, "b2"), 98, 2, 2)); !errors.As(err, &pe) || pe.Culprit != 6 {
		t.Fatalf("a part 2 after the HWM = %v, want a PartsError naming seq 6", err)
	}
	// Quarantined, the liar is skipped and the next commit applies.
	c = newCore(t, baseState(), Config{})
	for _, r := range []ledger.Record{quarantined(6, "a", false), rec("b", 7, 2, 3, "b2")} {
		if _, err := c.Step(Full, r); err != nil {
			t.Fatalf("Step seq %d: %v", r.Seq, err)
		}
	}
	if rd := c.mustReady(); rd.HWM != 7 {
		t.Fatalf("HWM %d, want 7", rd.HWM)
	}

	// A host that applied the liar before the quarantine must rebuild.
	c = newCore(t, baseState(), Config{})
	if _, err := c.Step(Scoped, liar); err != nil {
		t.Fatal(err)
	}
	c.persistAdvance(c.mustReady())
	if _, err := c.Step(Full, quarantined(6, "a", false)); !errors.Is(err, ErrAppliedQuarantined) || c.HasReady() {
		t.Fatalf("skip of an applied seq = %v, want ErrAppliedQuarantined", err)
	}
}

// A quarantined event that a commit already extended (issue 26 point 5): the
// next event names it as its prev. With the Bridge the log computes from the
// notice's link (ledger.BridgeOf) it applies after the event before the
// quarantined one; without, it is a gap the log can never fill. A bridge that
// does not lie behind the event's prev is malformed; one that leads elsewhere
// than the mark is a divergence; one beyond the mark is a gap up to it.
func TestBridgedQuarantine(t *testing.T) {
	next := rec("a", 7, 4, 6, "a4") // prev: seq 6, modelSeq 3, quarantined
	bridged := func(prev ledger.Seq, ms uint64) ledger.Record {
		r := next
		r.Bridge = &ledger.Bridge{Prev: prev, ModelSeq: ms}
		return r
	}
	c := newCore(t, baseState(), Config{})
	var gap *GapError
	if _, err := c.Classify(Full, next); !errors.As(err, &gap) || gap.To != 6 {
		t.Fatalf("unbridged: %v, want a gap to seq 6", err)
	}
	if v, err := c.Step(Full, quarantined(6, "a", false)); err != nil || v != Skip {
		t.Fatalf("quarantined seq 6: %v, %v", v, err)
	}
	if v, err := c.Step(Full, bridged(5, 2)); err != nil || v != Apply {
		t.Fatalf("bridged: %v, %v; want Apply", v, err)
	}
	rd := c.mustReady()
	if rd.HWM != 7 || rd.Marks["data--m--a"] != (Mark{4, 7}) {
		t.Fatalf("Ready = %+v", rd)
	}

	c = newCore(t, baseState(), Config{})
	if _, err := c.Classify(Full, bridged(6, 3)); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a bridge at prev itself: %v, want ErrInvalid", err)
	}
	if _, err := c.Classify(Full, bridged(4, 2)); !errors.Is(err, ErrDiverged) {
		t.Fatalf("a bridge to another seq than the mark's: %v, want ErrDiverged", err)
	}
	st := baseState()
	st.Marks["data--m--a"] = Mark{1, 2}
	st.HWM = 2
	c = newCore(t, st, Config{})
	if _, err := c.Classify(Full, bridged(5, 2)); !errors.As(err, &gap) || gap.From != 3 || gap.To != 5 {
		t.Fatalf("a bridge beyond the mark: %v, want a gap from 3 to 5", err)
	}
}

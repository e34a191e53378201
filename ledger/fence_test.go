package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	fenceLedger = "01234567-89ab-4cde-8f01-23456789abcd"
	fenceID     = "019a0000-0000-7000-8000-000000000001"
)

func testFenceRecord() FenceRecord {
	return FenceRecord{V: FormatVersion, Ledger: fenceLedger, Lock: "data/command/shell/x/.lock", ID: fenceID,
		Host: "host-a", Holder: "ann@laptop (pid 42)", At: time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)}
}

// The fence subjects: one token under the ledger's partition prefix that no
// partition key escapes to; a lock's name comes back from its subject.
func TestFenceSubjects(t *testing.T) {
	t.Parallel()
	for _, lock := range []string{".datastore.lock", "data/command/shell/x/.lock", ".locks/ci.lock", "ci/data/a b/~q/.lock", "~"} {
		s := FenceSubject("infra", lock)
		if !strings.HasPrefix(s, "syncledger.infra.p.~f") || strings.Count(s, ".") != 3 {
			t.Fatalf("FenceSubject(%q) = %q: not one token under syncledger.infra.p.", lock, s)
		}
		if got, ok := LockOfFenceSubject("infra", s); !ok || got != lock {
			t.Fatalf("LockOfFenceSubject(%q) = %q, %v; want %q", s, got, ok, lock)
		}
		if _, err := PartitionFromSubject("infra", s); err == nil {
			t.Fatalf("fence subject %q parses as a partition's", s)
		}
	}
	if _, err := PartitionFromSubject("infra", FenceCheckSubject("infra")); err == nil {
		t.Fatal("the fence check subject parses as a partition's")
	}
	for _, s := range []string{Subject("infra", "f"), Subject("infra", "~f"), QuarantineSubject("infra"), FenceCheckSubject("infra"), "syncledger.infra.p.~f"} {
		if lock, ok := LockOfFenceSubject("infra", s); ok {
			t.Fatalf("LockOfFenceSubject(%q) = %q: not a fence subject", s, lock)
		}
	}
}

// Fence records and checks decode strictly, as events do: version first,
// unknown fields refused, every field checked.
func TestFenceCodec(t *testing.T) {
	t.Parallel()
	rec := testFenceRecord()
	b, err := EncodeFenceRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeFenceRecord(b); err != nil || got != rec {
		t.Fatalf("DecodeFenceRecord(%s) = %+v, %v", b, got, err)
	}
	chk := FenceChecks(fenceLedger, fenceID, []Fence{{Lock: rec.Lock, Seq: 7}})[0]
	cb, err := EncodeFenceCheck(chk)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeFenceCheck(cb); err != nil || got != chk {
		t.Fatalf("DecodeFenceCheck(%s) = %+v, %v", cb, got, err)
	}
	edit := func(doc []byte, old, new string) []byte {
		if !strings.Contains(string(doc), old) {
			t.Fatalf("test setup: %q not in %s", old, doc)
		}
		return []byte(strings.Replace(string(doc), old, new, 1))
	}
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"version 2", edit(b, `"v":1`, `"v":2`), ErrUnknownVersion},
		{"unknown field", edit(b, `"v":1`, `"v":1,"expires":3`), ErrInvalid},
		{"no lock", edit(b, `"lock":"data/command/shell/x/.lock"`, `"lock":""`), ErrInvalid},
		{"long lock", edit(b, `"lock":"data/command/shell/x/.lock"`, `"lock":"`+strings.Repeat("l", MaxLockLen+1)+`"`), ErrInvalid},
		{"id not a uuid", edit(b, fenceID, "take-1"), ErrInvalid},
		{"no host", edit(b, `"host":"host-a"`, `"host":""`), ErrInvalid},
		{"no time", edit(b, `,"at":"2026-12-03T20:00:00Z"`, ``), ErrInvalid},
		{"trailing data", append(append([]byte{}, b...), "{}"...), ErrInvalid},
	} {
		if _, err := DecodeFenceRecord(c.in); !errors.Is(err, c.want) {
			t.Errorf("DecodeFenceRecord(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"version 0", edit(cb, `"v":1`, `"v":0`), ErrUnknownVersion},
		{"unknown field", edit(cb, `"fence":7`, `"fence":7,"host":"h"`), ErrInvalid},
		{"fence 0", edit(cb, `"fence":7`, `"fence":0`), ErrInvalid},
		{"commit not a uuid", edit(cb, fenceID, "c1"), ErrInvalid},
		{"ledger not a uuid", edit(cb, fenceLedger, "infra"), ErrInvalid},
	} {
		if _, err := DecodeFenceCheck(c.in); !errors.Is(err, c.want) {
			t.Errorf("DecodeFenceCheck(%s) = %v, want %v", c.name, err, c.want)
		}
	}
}

// MessageReader: fence records and checks are skipped records of no
// partition; one that is malformed, of another lineage, on another lock's
// subject or checking a later seq stops the read, as a bad event does.
func TestMessageReaderFences(t *testing.T) {
	t.Parallel()
	rec := testFenceRecord()
	b, _ := EncodeFenceRecord(rec)
	cb, _ := EncodeFenceCheck(FenceCheck{V: FormatVersion, Ledger: fenceLedger, Commit: fenceID, Lock: rec.Lock, Fence: 3})
	rd := &MessageReader{Name: "infra", UUID: fenceLedger}
	r, err := rd.Record(3, FenceSubject("infra", rec.Lock), b)
	if err != nil || r.Skip == nil || r.Skip.Fence == nil || *r.Skip.Fence != rec || r.Skip.Partition != "" || !r.LastOfCommit() {
		t.Fatalf("fence record = %+v, %v", r, err)
	}
	r, err = rd.Record(5, FenceCheckSubject("infra"), cb)
	if err != nil || r.Skip == nil || r.Skip.Check == nil || r.Skip.Check.Fence != 3 || r.Skip.Partition != "" {
		t.Fatalf("fence check = %+v, %v", r, err)
	}
	other := *rd
	other.UUID = "11111111-1111-4111-8111-111111111111"
	for _, c := range []struct {
		name    string
		rd      *MessageReader
		seq     Seq
		subject string
		data    []byte
		want    error
	}{
		{"garbage fence record", rd, 3, FenceSubject("infra", rec.Lock), []byte("{}"), ErrInvalid},
		{"fence record of another lock", rd, 3, FenceSubject("infra", "data/x/y/.lock"), b, ErrInvalid},
		{"fence record of another lineage", &other, 3, FenceSubject("infra", rec.Lock), b, ErrLineage},
		{"garbage fence check", rd, 5, FenceCheckSubject("infra"), []byte("null"), ErrInvalid},
		{"fence check of a later seq", rd, 3, FenceCheckSubject("infra"), cb, ErrInvalid},
		{"fence check of another lineage", &other, 5, FenceCheckSubject("infra"), cb, ErrLineage},
		{"an event on the fence check subject", rd, 5, FenceCheckSubject("infra"), mustEncode(t, testEvent()), ErrInvalid},
	} {
		var re *RecordError
		if _, err := c.rd.Record(c.seq, c.subject, c.data); !errors.As(err, &re) || re.Seq != c.seq || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want a RecordError at seq %d wrapping %v", c.name, err, c.seq, c.want)
		}
	}
	// A quarantined fence record is skipped as quarantined.
	q := &MessageReader{Name: "infra", UUID: fenceLedger, Quarantined: map[Seq]Quarantine{3: {Seq: 3}}}
	if r, err := q.Record(3, FenceSubject("infra", rec.Lock), []byte("{}")); err != nil || r.Skip == nil || r.Skip.Quarantine.Seq != 3 {
		t.Fatalf("quarantined fence record = %+v, %v", r, err)
	}
}

func mustEncode(t *testing.T, e Event) []byte {
	t.Helper()
	b, err := EncodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// CheckAppend's fence rules, and LockLostError's contract: ErrLockLost, never
// ErrConflict.
func TestCheckAppendFences(t *testing.T) {
	t.Parallel()
	ev := testEvent()
	ev.Parts, ev.Part = 1, 1
	evs := []Event{ev}
	ok := Fence{Lock: ".datastore.lock", Seq: 4}
	if err := CheckAppend(ev.Ledger, evs, ok, Fence{Lock: "data/a/b/.lock", Seq: 2}); err != nil {
		t.Fatal(err)
	}
	many := make([]Fence, MaxBatch)
	for i := range many {
		many[i] = Fence{Lock: strings.Repeat("l", i+1), Seq: 1}
	}
	for _, c := range []struct {
		name   string
		fences []Fence
		want   error
	}{
		{"seq 0", []Fence{{Lock: "l"}}, ErrInvalid},
		{"no lock", []Fence{{Seq: 1}}, ErrInvalid},
		{"lock twice", []Fence{ok, ok}, ErrInvalid},
		{"bad utf-8", []Fence{{Lock: "\xff", Seq: 1}}, ErrInvalid},
		{"batch over MaxBatch", many, ErrTooLarge},
	} {
		if err := CheckAppend(ev.Ledger, evs, c.fences...); !errors.Is(err, c.want) {
			t.Errorf("CheckAppend(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	rec := testFenceRecord()
	err := error(&LockLostError{Lock: rec.Lock, Fence: 3, Last: 9, Taker: &rec})
	if !errors.Is(err, ErrLockLost) || errors.Is(err, ErrConflict) {
		t.Fatalf("LockLostError: Is(ErrLockLost) %v, Is(ErrConflict) %v", errors.Is(err, ErrLockLost), errors.Is(err, ErrConflict))
	}
	for _, want := range []string{rec.Lock, "lock lost", "ann@laptop (pid 42) on host host-a", "2026-12-03T20:00:00Z", "seq 9", "seq 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LockLostError %q does not say %q", err, want)
		}
	}
	if got := FenceCheckSeqs([]Seq{4, 5}, 2); len(got) != 2 || got[0] != 6 || got[1] != 7 {
		t.Fatalf("FenceCheckSeqs = %v, want [6 7]", got)
	}
}

package statedb

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/syncledger/syncledger/ledger"
	bolt "go.etcd.io/bbolt"
)

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Digest: ledger.DigestOf([]byte("x")), Size: 1, Mode: 0o644, MTime: time.Unix(0, 1234567890), Seq: 7}
	err = db.Update(func(tx *Tx) error {
		if err := tx.SetLedger("u", "default"); err != nil {
			return err
		}
		if err := tx.SetHWM(9); err != nil {
			return err
		}
		if err := tx.PutMark("p", Mark{ModelSeq: 2, Seq: 7}); err != nil {
			return err
		}
		if err := tx.Put("a/b", e); err != nil {
			return err
		}
		return tx.Put("a/lazy", Entry{Digest: e.Digest, Size: 1, Lazy: true, Seq: 8})
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := State{Ledger: "u", Name: "default", HWM: 9, Marks: map[string]Mark{"p": {ModelSeq: 2, Seq: 7}}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
	got, ok, err := db.Get("a/b")
	if err != nil || !ok || !got.MTime.Equal(e.MTime) || got.Digest != e.Digest || got.Size != 1 || got.Mode != 0o644 || got.Seq != 7 {
		t.Fatalf("Get = %+v %v %v", got, ok, err)
	}
	lz, _, _ := db.Get("a/lazy")
	if !lz.Lazy || !lz.MTime.IsZero() {
		t.Fatalf("lazy entry %+v", lz)
	}
	n := 0
	db.ForEach(func(string, Entry) error { n++; return nil })
	if n != 2 {
		t.Fatalf("ForEach saw %d entries", n)
	}
}

func TestMonotone(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Update(func(tx *Tx) error { tx.SetHWM(10); return tx.PutMark("p", Mark{ModelSeq: 3, Seq: 10}) })
	if err := db.Update(func(tx *Tx) error { return tx.SetHWM(9) }); err == nil {
		t.Fatal("HWM decreased")
	}
	if err := db.Update(func(tx *Tx) error { return tx.PutMark("p", Mark{ModelSeq: 2, Seq: 8}) }); err == nil {
		t.Fatal("mark decreased")
	}
	if _, h, _ := db.HWM(); h != 10 {
		t.Fatalf("HWM %d after refused updates", h)
	}
}

func TestBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Open(path, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// TestBusyContext: a wait for another holder's lock ends with its context,
// not after the whole wait, and goes on across attempts until the holder
// lets go.
func TestBusyContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*lockPoll)
	defer cancel()
	start := time.Now()
	if _, err := OpenContext(ctx, path, time.Hour); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrLocked) {
		t.Fatalf("open with an ended context: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("the wait took %v: it ignored its context", d)
	}
	// The holder lets go after several attempts: the waiter gets the lock.
	released := make(chan error, 1)
	go func() {
		time.Sleep(3 * lockPoll)
		released <- db.Close()
	}()
	db2, err := OpenContext(t.Context(), path, time.Hour)
	if err != nil {
		t.Fatalf("open after the holder let go: %v", err)
	}
	db2.Close()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
}

func TestJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	da, db2, dc := ledger.DigestOf([]byte("a")), ledger.DigestOf([]byte("b")), ledger.DigestOf([]byte("c"))
	want := func(what string, w map[string]JournalEntry) {
		t.Helper()
		got, err := db.Journal()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: journal (-want +got):\n%s", what, diff)
		}
	}
	// A Ready's journal, never claimed (an interrupted apply).
	first, err := db.AddJournal([]JournalPath{{"a", JournalEntry{Digests: []ledger.Digest{da}}}, {"b", JournalEntry{Removed: true}}})
	if err != nil {
		t.Fatal(err)
	}
	want("first record", map[string]JournalEntry{"a": {Digests: []ledger.Digest{da}}, "b": {Removed: true}})
	// The next apply journals a again, and c: the first record is folded, and
	// a's entry comes back merged.
	second := []JournalPath{{"a", JournalEntry{Digests: []ledger.Digest{db2}}}, {"c", JournalEntry{Digests: []ledger.Digest{dc}}}}
	id, err := db.AddJournal(second)
	if err != nil {
		t.Fatal(err)
	}
	if id == first || id == 0 {
		t.Fatalf("second record's ID %d, first %d: want a new one", id, first)
	}
	if a := second[0].JournalEntry; !a.Matches(true, da) || !a.Matches(true, db2) || a.Matches(false, da) {
		t.Fatalf("merged entry %+v: want both digests, not removed", a)
	}
	both := map[string]JournalEntry{"a": second[0].JournalEntry, "b": {Removed: true}, "c": {Digests: []ledger.Digest{dc}}}
	want("folded", both)
	// The journal survives a reopen and the database's check.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path, time.Second); err != nil {
		t.Fatal(err)
	}
	want("reopened", both)
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	// Claiming the second Ready clears its record and its paths' rows; b,
	// which only the unclaimed first Ready touched, stays.
	if err := db.Update(func(tx *Tx) error { return tx.ClearJournal(id, []string{"a", "c"}) }); err != nil {
		t.Fatal(err)
	}
	want("claimed", map[string]JournalEntry{"b": {Removed: true}})
	// A claim naming another record folds it: nothing journalled is dropped
	// by a claim that did not write it.
	if _, err := db.AddJournal([]JournalPath{{"d", JournalEntry{Removed: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error { return tx.ClearJournal(0, nil) }); err != nil {
		t.Fatal(err)
	}
	want("claim of no record", map[string]JournalEntry{"b": {Removed: true}, "d": {Removed: true}})
	if err := db.Update(func(tx *Tx) error { return tx.ClearJournal(0, []string{"b", "d"}) }); err != nil {
		t.Fatal(err)
	}
	want("all claimed", nil)
}

func TestJournalRecordCorrupt(t *testing.T) {
	for name, v := range map[string][]byte{
		"short ID":        {1, 2, 3},
		"path past end":   append(make([]byte, 8), 9, 'a'),
		"entry past end":  append(make([]byte, 8), 1, 'a', 40, 0),
		"entry bad size":  append(make([]byte, 8), 1, 'a', 2, 0, 0),
		"empty path":      append(make([]byte, 8), 0, 1, 0),
		"bad uvarint len": append(make([]byte, 8), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		t.Run(name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(kJournal, v) }); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Journal(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Journal of a damaged record: %v, want ErrCorrupt", err)
			}
			if err := db.Check(); err == nil {
				t.Fatal("Check passed a damaged journal record")
			}
			if _, err := db.AddJournal([]JournalPath{{"x", JournalEntry{Removed: true}}}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("AddJournal over a damaged record: %v, want ErrCorrupt (never dropped silently)", err)
			}
		})
	}
}

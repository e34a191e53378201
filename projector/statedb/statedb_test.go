package statedb

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/syncledger/syncledger/ledger"
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
	db, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	da, db2 := ledger.DigestOf([]byte("a")), ledger.DigestOf([]byte("b"))
	// Out of path order: AddJournal sorts them.
	if err := db.AddJournal([]JournalPath{{"b", JournalEntry{Removed: true}}, {"a", JournalEntry{Digests: []ledger.Digest{da}}}}); err != nil {
		t.Fatal(err)
	}
	merged := []JournalPath{{"a", JournalEntry{Digests: []ledger.Digest{db2}}}}
	if err := db.AddJournal(merged); err != nil {
		t.Fatal(err)
	}
	if a := merged[0].JournalEntry; !a.Matches(true, da) || !a.Matches(true, db2) || a.Matches(false, da) {
		t.Fatalf("merged entry %+v: want both digests, not removed", a)
	}
	got, err := db.Journal()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]JournalEntry{"a": merged[0].JournalEntry, "b": {Removed: true}}, got); diff != "" {
		t.Fatalf("journal (-want +got):\n%s", diff)
	}
	db.Update(func(tx *Tx) error { return tx.ClearJournal("a") })
	if got, _ := db.Journal(); len(got) != 1 || !got["b"].Matches(false, ledger.Digest{}) {
		t.Fatalf("after clearing a: %v", got)
	}
}

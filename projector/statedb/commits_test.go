package statedb

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestCommits: the commits at the marks and the top commit round-trip (the
// top only rises); a record whose seq is not its mark's (a release before
// them moved the mark) is unknown; Reset clears them.
func TestCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, b := Commit{Seq: 7, ID: "0190aaaa-0000-7000-8000-000000000007"}, Commit{Seq: 9, ID: "0190aaaa-0000-7000-8000-000000000009"}
	err = db.Update(func(tx *Tx) error {
		for _, f := range []func() error{
			func() error { return tx.SetHWM(9) },
			func() error { return tx.PutMark("p", Mark{ModelSeq: 2, Seq: 7}) },
			func() error { return tx.PutMark("q", Mark{ModelSeq: 1, Seq: 9}) },
			func() error { return tx.PutMarkCommit("p", a) },
			func() error { return tx.PutMarkCommit("q", b) },
			func() error { return tx.SetTopCommit(b) },
			func() error { return tx.SetTopCommit(a) }, // below: b stays
		} {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := db.MarkCommit("p"); err != nil || c != a {
		t.Fatalf("MarkCommit(p) = %+v, %v; want %+v", c, err, a)
	}
	if c, err := db.TopCommit(); err != nil || c != b {
		t.Fatalf("TopCommit = %+v, %v; want %+v", c, err, b)
	}
	var got []string
	if err := db.MarkCommits(func(p string, c Commit) bool { got = append(got, p+"@"+c.ID); return true }); err != nil || len(got) != 2 {
		t.Fatalf("MarkCommits = %v, %v", got, err)
	}
	// A mark moved by a release that records no commit: its record is stale.
	if err := db.Update(func(tx *Tx) error { return tx.PutMark("p", Mark{ModelSeq: 3, Seq: 8}) }); err != nil {
		t.Fatal(err)
	}
	if c, err := db.MarkCommit("p"); err != nil || c.Known() {
		t.Fatalf("MarkCommit(p) after its mark moved without a record = %+v, %v; want unknown", c, err)
	}
	got = nil
	if err := db.MarkCommits(func(p string, c Commit) bool { got = append(got, p); return true }); err != nil || len(got) != 1 || got[0] != "q" {
		t.Fatalf("MarkCommits = %v, %v; want only q's", got, err)
	}
	if err := db.Update(func(tx *Tx) error { return tx.Reset() }); err != nil {
		t.Fatal(err)
	}
	if c, err := db.TopCommit(); err != nil || c.Known() {
		t.Fatalf("TopCommit after Reset = %+v, %v", c, err)
	}
	if c, err := db.MarkCommit("q"); err != nil || c.Known() {
		t.Fatalf("MarkCommit(q) after Reset = %+v, %v", c, err)
	}
}

// TestCommitsMigration: a database made before the commits were recorded
// (no such bucket) opens, gets the bucket, and knows no commit.
func TestCommitsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error {
		if err := tx.SetHWM(4); err != nil {
			return err
		}
		return tx.PutMark("p", Mark{ModelSeq: 1, Seq: 4})
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	old, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bCommits) }); err != nil {
		t.Fatal(err)
	}
	old.Close()
	db, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if c, err := db.TopCommit(); err != nil || c.Known() {
		t.Fatalf("TopCommit of an older cache = %+v, %v; want unknown", c, err)
	}
	if c, err := db.MarkCommit("p"); err != nil || c.Known() {
		t.Fatalf("MarkCommit of an older cache = %+v, %v; want unknown", c, err)
	}
	if err := db.Update(func(tx *Tx) error { return tx.PutMarkCommit("p", Commit{Seq: 4, ID: "x"}) }); err != nil {
		t.Fatal(err)
	}
	if c, err := db.MarkCommit("p"); err != nil || c.ID != "x" {
		t.Fatalf("MarkCommit after recording = %+v, %v", c, err)
	}
}

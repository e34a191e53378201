package statedb

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
)

// fillRows are n index paths in path order, over 50 directories.
func fillRows(n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("data/d%02d/f%07d", i*50/n, i)
	}
	return paths
}

// putRows writes paths in one transaction and reports whether it filled the
// index densely.
func putRows(t *testing.T, db *DB, paths []string) (dense bool) {
	t.Helper()
	e := Entry{Digest: ledger.DigestOf([]byte("x")), Size: 1, Mode: 0o644, MTime: time.Unix(0, 1), Seq: 1}
	err := db.Update(func(tx *Tx) error {
		for _, p := range paths {
			if err := tx.Put(p, e); err != nil {
				return err
			}
		}
		dense = tx.fill.dense()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dense
}

// indexPages returns the index bucket's leaf page count and the size of the
// database's pages (the file is grown ahead of them, in steps).
func indexPages(t *testing.T, db *DB) (leaves int, size int64) {
	t.Helper()
	if err := db.view(func(tx *bolt.Tx) error {
		leaves, size = tx.Bucket(bIndex).Stats().LeafPageN, tx.Size()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return leaves, size
}

// TestIndexFill: a transaction whose new rows come in path order (a cold
// commit) fills the index's pages to 90%, not bbolt's 50%; the same rows in
// shuffled order, and a transaction of scattered inserts after an in-order
// one, keep the default fill (a dense page splits at the next random insert).
func TestIndexFill(t *testing.T) {
	const n = 20_000
	paths := fillRows(n)
	open := func() *DB {
		db, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}

	inOrder := open()
	if !putRows(t, inOrder, paths) {
		t.Fatal("rows put in path order: not dense")
	}
	inLeaves, inSize := indexPages(t, inOrder)

	shuffled := open()
	mixed := slices.Clone(paths)
	rand.New(rand.NewPCG(29, 1)).Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	if putRows(t, shuffled, mixed) {
		t.Fatal("rows put in shuffled order: dense")
	}
	shLeaves, shSize := indexPages(t, shuffled)
	t.Logf("%d rows: in order %d leaf pages, %d bytes of pages; shuffled %d leaf pages, %d bytes", n, inLeaves, inSize, shLeaves, shSize)
	if 10*inLeaves > 7*shLeaves || 10*inSize > 7*shSize {
		t.Fatalf("in order: %d leaf pages, %d bytes of pages; shuffled: %d, %d: want clearly fewer in order", inLeaves, inSize, shLeaves, shSize)
	}

	// Default fill, in order, for the same rows: what 0.9 saves.
	def := open()
	if err := def.Update(func(tx *Tx) error {
		b := tx.tx.Bucket(bIndex)
		for _, p := range paths {
			if err := b.Put([]byte(p), Entry{Seq: 1}.marshal()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	defLeaves, defSize := indexPages(t, def)
	t.Logf("in order at the default fill: %d leaf pages, %d bytes of pages", defLeaves, defSize)
	if 10*inLeaves > 7*defLeaves || 10*inSize > 7*defSize {
		t.Fatalf("in order: %d leaf pages, at the default fill %d", inLeaves, defLeaves)
	}

	// Scattered inserts after the bulk: one row in each directory's middle.
	var later []string
	for d := range 50 {
		later = append(later, fmt.Sprintf("data/d%02d/f%07d-new", d, d*n/50+n/100))
	}
	if putRows(t, inOrder, later) {
		t.Fatal("scattered inserts after an in-order bulk: dense")
	}
	// Updates of existing rows are no new rows: no fill change either.
	if putRows(t, inOrder, paths[:1000]) {
		t.Fatal("updates of existing rows: dense")
	}
	// A second in-order run appended after the bulk is dense again.
	if !putRows(t, inOrder, []string{"data/e/1", "data/e/2", "data/e/3"}) {
		t.Fatal("rows appended in order: not dense")
	}
}

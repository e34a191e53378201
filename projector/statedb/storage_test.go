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
	"github.com/syncledger/syncledger/projector"
)

// TestStorageMatchesMemory: the database answers the projector's Storage
// queries as projector.MemoryStorage does over the same state, for random
// indexes over few names (prefixes that are files, directories, both, and
// names sharing a prefix across '/': "a", "a-b", "a/b").
func TestStorageMatchesMemory(t *testing.T) {
	names := []string{"a", "a-b", "a.b", "a/b", "a/b/c", "a/b-c", "a/b/c/d", "b", "b/a", "a0", "a/b0/c"}
	r := rand.New(rand.NewPCG(17, 1))
	for round := range 40 {
		db, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		st := projector.State{Ledger: "11111111-1111-4111-8111-111111111111", HWM: 9, Marks: map[string]projector.Mark{}, Files: map[string]projector.File{}}
		err = db.Update(func(tx *Tx) error {
			if err := tx.SetLedger(st.Ledger, "x"); err != nil {
				return err
			}
			if err := tx.SetHWM(st.HWM); err != nil {
				return err
			}
			for i, n := range names {
				if r.IntN(2) == 0 {
					continue
				}
				f := projector.File{SHA256: ledger.DigestOf([]byte(n)), Size: int64(i), Mode: 0o644, Lazy: i%3 == 0}
				st.Files["data/"+n] = f
				if err := tx.Put("data/"+n, Entry{Digest: f.SHA256, Size: f.Size, Mode: f.Mode, Lazy: f.Lazy}); err != nil {
					return err
				}
				if r.IntN(2) == 0 {
					p := fmt.Sprintf("data--%d", i)
					st.Marks[p] = projector.Mark{ModelSeq: uint64(i + 1), Seq: ledger.Seq(i + 1)}
					if err := tx.PutMark(p, st.Marks[p]); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		mem, err := projector.NewMemoryStorage(st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := projector.ReadState(db)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := projector.ReadState(mem)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: the database's state %+v, memory's %+v", round, got, want)
		}
		for _, n := range append(slices.Clone(names), "", "c", "a/") {
			p := "data/" + n
			u1, err := db.Under(p)
			u2, _ := mem.Under(p)
			f1, ok1, err2 := db.File(p)
			f2, ok2, _ := mem.File(p)
			var l1, l2 []string
			err3 := db.Files(p, func(q string, _ projector.File) bool { l1 = append(l1, q); return true })
			_ = mem.Files(p, func(q string, _ projector.File) bool { l2 = append(l2, q); return true })
			if err != nil || err2 != nil || err3 != nil {
				t.Fatal(err, err2, err3)
			}
			if u1 != u2 || ok1 != ok2 || f1 != f2 || !slices.Equal(l1, l2) {
				t.Fatalf("round %d, %q: Under %v/%v, File %v %v/%v %v, Files %q/%q (database/memory)", round, p, u1, u2, f1, ok1, f2, ok2, l1, l2)
			}
		}
		db.Close()
	}
}

// BenchmarkReads: the core's point reads (File, Under) on an index of 100,000
// rows, in the reads' shared transaction, beside a read in a transaction of
// its own.
//
//	go test -run '^$' -bench Reads ./projector/statedb/
func BenchmarkReads(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "state.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const n = 100_000
	path := func(i int) string { return fmt.Sprintf("data/m%03d/f%d/raw", i%100, i%n) }
	if err := db.Update(func(tx *Tx) error {
		for i := range n {
			if err := tx.Put(path(i), Entry{Size: 1}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.Run("File", func(b *testing.B) {
		for i := range b.N {
			if _, ok, err := db.File(path(i)); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("File, a transaction each", func(b *testing.B) { // the baseline: what a read cost before the shared transaction
		for i := range b.N {
			err := db.db.View(func(tx *bolt.Tx) error {
				_, err := unmarshalEntry(tx.Bucket(bIndex).Get([]byte(path(i))))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Under", func(b *testing.B) {
		for i := range b.N {
			if _, err := db.Under(path(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

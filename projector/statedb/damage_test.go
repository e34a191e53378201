package statedb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fill writes n index rows: enough for n ≥ 300 to span leaf pages under a
// branch page.
func fill(t *testing.T, path string, n int) {
	t.Helper()
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *Tx) error {
		for i := range n {
			if err := tx.Put(fmt.Sprintf("data/m%d/x/metadata.yaml", i), Entry{Size: int64(i)}); err != nil {
				return err
			}
		}
		return tx.PutMark("p", Mark{ModelSeq: 1, Seq: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damage rewrites the file at path with fn applied to each page after the
// two meta pages (off: the page's offset).
func damage(t *testing.T, path string, fn func(b []byte, off int)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int(binary.LittleEndian.Uint32(b[16+8:]))
	for off := 2 * size; off < len(b); off += size {
		fn(b, off)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamageIsAnError: bbolt panics on a damaged page (an assertion) and
// faults on a page id past its map; every call of the DB returns a
// *CorruptError instead, and keeps returning it; Check finds the damage;
// SetAside moves the file out of the way, refusing while the file is open.
func TestDamageIsAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fn   func(b []byte, off int)
	}{
		{"page headers", func(b []byte, off int) { b[off] ^= 0xff }},
		{"branch children past the map", func(b []byte, off int) {
			if binary.LittleEndian.Uint16(b[off+8:]) != 0x01 {
				return
			}
			for i := range int(binary.LittleEndian.Uint16(b[off+10:])) {
				binary.LittleEndian.PutUint64(b[off+16+i*16+8:], 1<<30+uint64(i))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "state.db")
			fill(t, path, 400)
			damage(t, path, tc.fn)
			db, err := Open(path, time.Second)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open: %v, want ErrCorrupt", err)
				}
			} else {
				_, _, gerr := db.Get("data/m399/x/metadata.yaml")
				ferr := db.ForEach(func(string, Entry) error { return nil })
				if !errors.Is(gerr, ErrCorrupt) && !errors.Is(ferr, ErrCorrupt) {
					t.Fatalf("reads of a damaged index: %v, %v; want ErrCorrupt", gerr, ferr)
				}
				// Sticky: no later call reads or writes the damaged file.
				if _, err := db.Gen(); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("a read after the damage: %v", err)
				}
				if err := db.Update(func(tx *Tx) error { return tx.SetHWM(3) }); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("a write after the damage: %v", err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db, err = Open(path, time.Second)
				if err == nil {
					if err = db.Check(); err == nil {
						t.Fatal("Check found no damage")
					}
					db.Close()
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("check: %v, want ErrCorrupt", err)
				}
			}

			other, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := lockFile(other); err != nil {
				t.Fatal(err)
			}
			if _, err := SetAside(path, time.Now()); !errors.Is(err, ErrLocked) {
				t.Fatalf("set aside while another holds it: %v, want ErrLocked", err)
			}
			other.Close()
			aside, err := SetAside(path, time.Now())
			if err != nil || !strings.Contains(aside, ".damaged-") {
				t.Fatalf("set aside: %q, %v", aside, err)
			}
			db, err = Open(path, time.Second)
			if err != nil {
				t.Fatalf("a new state after setting the damaged one aside: %v", err)
			}
			defer db.Close()
			if err := db.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckSound: Check passes a sound database, and Recovering round-trips.
func TestCheckSound(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	fill(t, path, 400)
	db, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRecovering("conflicts/x"); err != nil {
		t.Fatal(err)
	}
	if keep, err := db.Recovering(); keep != "conflicts/x" || err != nil {
		t.Fatalf("recovering = %q, %v", keep, err)
	}
	if _, ok, err := db.Restoring(); !ok || err != nil {
		t.Fatalf("restoring = %v, %v: a sync must finish the rebuild", ok, err)
	}
	if err := db.ClearRecovering(); err != nil {
		t.Fatal(err)
	}
	if keep, err := db.Recovering(); keep != "" || err != nil {
		t.Fatalf("recovering after clear = %q, %v", keep, err)
	}
}

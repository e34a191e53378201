package statedb

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestForEachEntered: ForEachEntered hands out the rows ForEachPrefix would,
// less those under a directory enter refuses, and its cursor reads one row
// per refused directory it meets, not the directory's rows; enter is asked
// once per directory.
func TestForEachEntered(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var paths []string
	for _, d := range []string{"a", "a/keep", "a/skip", "a/skip/deep", "a/skip0", "a/skip.x", "b", "b/skip", "b/x/skip", "c/keep/skip", "skip"} {
		for i := range 100 {
			paths = append(paths, fmt.Sprintf("%s/f%03d", d, i))
		}
	}
	paths = append(paths, "a/skip-file", "top", "a0/x")
	if err := db.Update(func(tx *Tx) error {
		for _, p := range paths {
			if err := tx.Put(p, Entry{Size: int64(len(p))}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	refused := func(dir string) bool { return dir == "skip" || strings.HasSuffix(dir, "/skip") }
	var reads, readsAll int
	onEnteredRead = func([]byte) { reads++ }
	defer func() { onEnteredRead = nil }()

	for _, prefix := range []string{"", "a/", "b/x/", "c/keep/", "a"} {
		// The naive filter: every row of the prefix, less those with a refused directory below it.
		var want []string
		for _, p := range slices.Sorted(slices.Values(paths)) {
			if !strings.HasPrefix(p, prefix) {
				continue
			}
			in := true
			for i := len(prefix); i < len(p); i++ {
				if p[i] == '/' && refused(p[:i]) {
					in = false
				}
			}
			if in {
				want = append(want, p)
			}
		}
		asked := map[string]int{}
		enter := func(dir string) bool { asked[dir]++; return !refused(dir) }
		var got []string
		reads = 0
		err := db.ForEachEntered(prefix, enter, func(p string, e Entry) (bool, error) {
			if e.Size != int64(len(p)) {
				t.Errorf("%s: row of size %d", p, e.Size)
			}
			got = append(got, p)
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("prefix %q: rows\n%v\nwant\n%v", prefix, got, want)
		}
		skipped := 0
		for dir, n := range asked {
			if n != 1 {
				t.Errorf("prefix %q: enter asked %d times of %s", prefix, n, dir)
			}
			if refused(dir) {
				skipped++
			}
		}
		// One read per row handed out, and one per refused directory: the
		// row that named it.
		if reads != len(want)+skipped {
			t.Errorf("prefix %q: %d rows read for %d handed out and %d directories skipped", prefix, reads, len(want), skipped)
		}
		t.Logf("prefix %q: %d rows handed out, %d read, %d directories skipped", prefix, len(got), reads, skipped)
		if prefix == "" {
			readsAll = reads
		}
	}
	if readsAll >= len(paths)/2 {
		t.Fatalf("read %d of the %d rows for 503 entered", readsAll, len(paths))
	}

	// A nil enter is ForEachPrefix; fn's false stops.
	n := 0
	if err := db.ForEachEntered("a/", nil, func(string, Entry) (bool, error) { n++; return n < 3, nil }); err != nil || n != 3 {
		t.Fatalf("nil enter, stopped at 3: %d rows, %v", n, err)
	}
}

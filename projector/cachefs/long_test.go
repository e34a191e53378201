package cachefs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// longRoot returns a cache root of about n bytes: a temp directory and
// 200-byte directories under it.
func longRoot(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for len(root) < n-201 {
		root = filepath.Join(root, strings.Repeat("r", 200))
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// deepPath returns a valid ledger path of about n bytes: 200-byte directories
// and a file name.
func deepPath(n int, file string) string {
	var b strings.Builder
	for b.Len()+201+len(file) <= n {
		b.WriteString(strings.Repeat("d", 200) + "/")
	}
	b.WriteString(file)
	return b.String()
}

// TestLongPaths is issue 38 point 9: a path the ledger accepts (here 3.9 KB)
// under a cache root a few hundred bytes long is more than one system call
// takes (PATH_MAX): every write, stat, open, removal, flush and scan of it
// failed with "file name too long", so a host with a longer cache root than
// the writer's could never apply the commit. Each operation now goes through
// the cache root's directory when the whole path is too long; what it
// refuses (a symlink on the way, a symlink at the path) it still refuses.
func TestLongPaths(t *testing.T) {
	t.Parallel()
	root := longRoot(t, 700)
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rel := deepPath(3900, "raw")
	other := filepath.ToSlash(filepath.Join(filepath.Dir(rel), "other"))
	if err := ledger.ValidatePath(rel); err != nil {
		t.Fatal(err)
	}
	if n := len(root) + 1 + len(rel); n <= 4096 {
		t.Fatalf("test setup: %d bytes is not past PATH_MAX", n)
	}

	// Write, Stat, Hash, Open.
	if err := write(t, d, rel, "deep"); err != nil {
		t.Fatalf("write: %v", err)
	}
	fi, err := d.Stat(rel)
	if err != nil || fi.Size != 4 || fi.Mode != 0o640 {
		t.Fatalf("stat: %+v, %v", fi, err)
	}
	if dg, n, err := d.Hash(rel); err != nil || n != 4 || dg != ledger.DigestOf([]byte("deep")) {
		t.Fatalf("hash: %v %d %v", dg, n, err)
	}
	// WriteDeferred through a Stater, then Flush.
	st := d.NewStater()
	if _, err := st.WriteDeferred(other, strings.NewReader("o"), ledger.DigestOf([]byte("o")), 1, 0o644); err != nil {
		t.Fatalf("write deferred: %v", err)
	}
	if err := d.Flush([]string{rel}, []string{other}, 2); err != nil {
		t.Fatalf("flush: %v", err)
	}
	f, err := st.Open(other)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "o" {
		t.Fatalf("read %q", b)
	}

	// The scan sees both files, reports nothing skipped; so does a scan of
	// the paths.
	for _, scope := range [][]string{nil, {rel}, {filepath.ToSlash(filepath.Dir(rel))}, {strings.Repeat("d", 200)}} {
		var seen []string
		var skipped []Skipped
		collect := func(p string, fi FileInfo) error { seen = append(seen, p); return nil }
		var err error
		if scope == nil {
			err = d.Scan(collect, func(s Skipped) { skipped = append(skipped, s) })
		} else {
			ign, _ := d.Ignore()
			err = d.ScanPaths(ign, scope, collect, func(s Skipped) { skipped = append(skipped, s) })
		}
		slices.Sort(seen)
		want := []string{other, rel}
		if len(scope) == 1 && scope[0] == rel {
			want = []string{rel}
		}
		if err != nil || !slices.Equal(seen, want) || len(skipped) != 0 {
			t.Fatalf("scan of %.40q: %v, saw %d paths %.60q, skipped %v", scope, err, len(seen), seen, skipped)
		}
	}
	if files, err := d.Files(strings.Repeat("d", 200)); err != nil || len(files) != 2 {
		t.Fatalf("files: %d, %v", len(files), err)
	}

	// Move aside into the state directory and back.
	aside := ledger.StateDir + "/conflicts/x/" + rel
	if err := d.Move(rel, aside); err != nil {
		t.Fatalf("move aside: %v", err)
	}
	if _, err := d.Stat(rel); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat after the move: %v", err)
	}
	if err := d.Move(aside, rel); err != nil {
		t.Fatalf("move back: %v", err)
	}

	// A symlink at the path, or on the way, is refused as before.
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Remove(filepath.FromSlash(other)); err != nil {
		t.Fatal(err)
	}
	if err := r.Symlink("raw", filepath.FromSlash(other)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stat(other); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("stat of a symlink: %v, want ErrUnsafePath", err)
	}
	if f, err := d.NewStater().Open(other); err == nil {
		f.Close()
		t.Fatal("opened a symlink")
	}
	if err := write(t, d, other+"/below", "x"); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("write through a symlink: %v, want ErrUnsafePath", err)
	}
	if err := r.Remove(filepath.FromSlash(other)); err != nil {
		t.Fatal(err)
	}

	// Remove takes the file and the directories it empties.
	if err := d.Remove(rel); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, strings.Repeat("d", 200))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty parents left behind: %v", err)
	}
}

// TestScanRefusesReserved: a writer never takes what no host can hold, or
// what another host's machinery would read as its own (issue 38 point 10):
// the ignore file spelt in other case (on macOS and Windows it is the ignore
// file), a directory named like the state directory in other case. Each is
// skipped with the reason, once for a directory, and never reaches the
// commit; .syncledgerignore itself, a file, syncs.
func TestScanRefusesReserved(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".syncledgerignore", ".SYNCLEDGERIGNORE", ".SyncLedger/state.db", ".SyncLedger/tmp/x", "notes/a"} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var seen, skipped []string
	err = d.Scan(func(rel string, fi FileInfo) error { seen = append(seen, rel); return nil },
		func(s Skipped) {
			if !s.Ignored {
				skipped = append(skipped, s.Path)
			}
		})
	slices.Sort(seen)
	slices.Sort(skipped)
	if err != nil || !slices.Equal(seen, []string{".syncledgerignore", "notes/a"}) || !slices.Equal(skipped, []string{".SYNCLEDGERIGNORE", ".SyncLedger"}) {
		t.Fatalf("scan: %v, saw %q, skipped %q", err, seen, skipped)
	}
}

package cachefs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/syncledger/syncledger/ledger"
)

func write(t *testing.T, d *Dir, rel, content string) error {
	t.Helper()
	_, err := d.Write(rel, strings.NewReader(content), ledger.DigestOf([]byte(content)), int64(len(content)), 0o640)
	return err
}

func TestWriteReadRemove(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := write(t, d, "data/t/m/d/1/raw", "hello"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(d.Root(), "data/t/m/d/1/raw"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("read back %q, %v", got, err)
	}
	fi, err := d.Stat("data/t/m/d/1/raw")
	if err != nil || fi.Size != 5 || fi.Mode != 0o640 {
		t.Fatalf("stat %+v, %v", fi, err)
	}
	dg, n, err := d.Hash("data/t/m/d/1/raw")
	if err != nil || n != 5 || dg != ledger.DigestOf([]byte("hello")) {
		t.Fatalf("hash %v %d %v", dg, n, err)
	}
	if err := write(t, d, "data/t/m/d/1/raw", "hello, again"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("data/t/m/d/1/raw"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "data")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty parents left behind: %v", err)
	}
	if err := d.Remove("data/t/m/d/1/raw"); err != nil {
		t.Fatalf("removing an absent file: %v", err)
	}
}

func TestWriteChecksumMismatchKeepsOldFile(t *testing.T) {
	d, _ := Open(t.TempDir())
	if err := write(t, d, "a/b", "old"); err != nil {
		t.Fatal(err)
	}
	_, err := d.Write("a/b", strings.NewReader("evil"), ledger.DigestOf([]byte("good")), 4, 0o644)
	if !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("mismatch: %v, want ErrChecksum", err)
	}
	if got, _ := os.ReadFile(filepath.Join(d.Root(), "a/b")); string(got) != "old" {
		t.Fatalf("file is %q after a refused write", got)
	}
	_, err = d.Write("a/c", strings.NewReader("short"), ledger.DigestOf([]byte("short")), 9, 0o644)
	if !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("size mismatch: %v", err)
	}
	if ents, _ := os.ReadDir(d.tmp); len(ents) != 0 {
		t.Fatalf("temp files left: %v", ents)
	}
}

func TestUnsafePaths(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	d, _ := Open(root)
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../escape", "/etc/passwd", "a/../../x", "link/x", "link/deep/x", ".syncledger/state.db", "file/x", "a\\b"} {
		err := write(t, d, rel, "pwned")
		if !errors.Is(err, ErrUnsafePath) {
			t.Errorf("Write(%q) = %v, want ErrUnsafePath", rel, err)
		}
		if err := d.Remove(rel); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("Remove(%q) = %v, want ErrUnsafePath", rel, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote outside the cache: %v", ents)
	}
}

func TestScan(t *testing.T) {
	d, _ := Open(t.TempDir())
	for _, rel := range []string{"data/t/m/d/1/raw", "audit/x.jsonl", ".catalog-export.json", "_index/_meta.json", "data/t/m/.lock", ".datastore-sync-state.json"} {
		if err := write(t, d, rel, rel); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/etc/passwd", filepath.Join(d.Root(), "audit", "sym"))
	var got []string
	var skipped []string
	err := d.Scan(func(rel string, fi FileInfo) error {
		got = append(got, rel)
		return nil
	}, func(s Skipped) { skipped = append(skipped, s.Path) })
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := []string{".catalog-export.json", "audit/x.jsonl", "data/t/m/d/1/raw"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("scan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"audit/sym"}, skipped); diff != "" {
		t.Fatalf("skipped (-want +got):\n%s", diff)
	}
}

func TestFlush(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	content := "deferred"
	if _, err := d.WriteDeferred("a/b/c", strings.NewReader(content), ledger.DigestOf([]byte(content)), int64(len(content)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := write(t, d, "a/x/y", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveDeferred("a/x/y"); err != nil {
		t.Fatal(err)
	}
	// A FIFO where a file was (the user's) must not block the flush, and a file
	// removed meanwhile is flushed as gone.
	if err := syscallMkfifo(filepath.Join(d.Root(), "a/fifo")); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush([]string{"a/b/c", "a/fifo", "a/missing"}, []string{"a/x/y", "z/never"}, 2); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := d.Flush([]string{"../escape"}, nil, 2); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("flush of an unsafe path: %v", err)
	}
}

// Open leaves temp files alone (another process may be writing them); RemoveTemp,
// called by the lock holder, drops them.
func TestOpenKeepsTempFilesRemoveTempDrops(t *testing.T) {
	root := t.TempDir()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(d.tmp, "w-leftover")
	if err := os.WriteFile(left, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err = Open(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("Open removed a temp file: %v", err)
	}
	d.RemoveTemp()
	if ents, _ := os.ReadDir(d.tmp); len(ents) != 0 {
		t.Fatalf("temp files left after RemoveTemp: %v", ents)
	}
}

// TestWriteVerifiedReader: content from a reader that verifies itself (a blob
// store's) is not hashed twice, and still never lands when it does not match;
// a reader verifying another digest is checked against the wanted one.
func TestWriteVerifiedReader(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	good, bad := []byte("good"), []byte("evil")
	want := ledger.DigestOf(good)
	st := d.NewStater()
	if _, err := st.WriteDeferred("data/a", ledger.NewVerifyingReader(bytes.NewReader(good), want), want, 4, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteDeferred("data/b", ledger.NewVerifyingReader(bytes.NewReader(bad), want), want, 4, 0o644); !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("tampered content behind a verifying reader: %v, want ErrChecksum", err)
	}
	other := ledger.DigestOf(bad)
	if _, err := st.WriteDeferred("data/c", ledger.NewVerifyingReader(bytes.NewReader(bad), other), want, 4, 0o644); !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("a reader verifying another digest: %v, want ErrChecksum", err)
	}
	for _, p := range []string{"data/b", "data/c"} {
		if _, err := os.Lstat(filepath.Join(d.Root(), p)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s exists after a failed write: %v", p, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(d.Root(), "data/a")); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("data/a: %q %v", got, err)
	}
}

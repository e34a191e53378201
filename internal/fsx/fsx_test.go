package fsx

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestCreateTempRename(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 50 {
		f, err := CreateTemp(dir, ".tmp-")
		if err != nil {
			t.Fatal(err)
		}
		if name := filepath.Base(f.Name()); !strings.HasPrefix(name, ".tmp-") || seen[name] || filepath.Dir(f.Name()) != dir {
			t.Fatalf("CreateTemp made %s: want a new .tmp-* name in %s", f.Name(), dir)
		}
		seen[filepath.Base(f.Name())] = true
		if _, err := f.WriteString("x"); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(filepath.Join(dir, func() string {
			for k := range seen {
				return k
			}
			return ""
		}()))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("temp file mode: %v, %v; want 0600", fi, err)
		}
	}
	if _, err := CreateTemp(filepath.Join(dir, "missing"), "x"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CreateTemp in a missing directory: %v, want not exist", err)
	}
	var src string
	for k := range seen {
		src = filepath.Join(dir, k)
		break
	}
	if err := Rename(src, filepath.Join(dir, "final")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "final")); err != nil || string(b) != "x" {
		t.Fatalf("renamed file: %q, %v", b, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Rename(filepath.Join(dir, "final"), filepath.Join(dir, "d")); err == nil {
		t.Fatal("Rename of a file onto a directory succeeded")
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDirNoFollow(dir); err != nil {
		t.Fatal(err)
	}
	if !DirSync {
		return
	}
	if err := SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory: %v, want not exist", err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(file); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("SyncDir of a file: %v, want ENOTDIR", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(link); err != nil {
		t.Fatalf("SyncDir follows a symlink to a directory: %v", err)
	}
	if err := SyncDirNoFollow(link); !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("SyncDirNoFollow of a symlink: %v, want ELOOP or ENOTDIR", err)
	}
}

func TestOpenNoFollow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenNoFollow(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || string(b) != "content" {
		t.Fatalf("read %q, %v: want the file's content", b, err)
	}
	if _, err := OpenNoFollow(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing file: %v, want ErrNotExist", err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenNoFollow(link); err == nil {
		f.Close()
		t.Fatal("OpenNoFollow opened a symlink")
	}
}

// TestRemoveEmptyDirs: the empty directories go, deepest first (a chain of
// them entirely); a file and the directories holding it stay.
func TestRemoveEmptyDirs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/b/c", "a/e", "k/l"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "k/l/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	RemoveEmptyDirs(dir)
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		left = append(left, filepath.ToSlash(rel))
		return nil
	})
	if want := []string{".", "k", "k/l", "k/l/f"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}

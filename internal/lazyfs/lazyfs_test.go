//go:build linux

package lazyfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// mountT mounts a new FS in a temp directory. Without root or /dev/fuse the
// test skips, unless SYNCLEDGER_TEST_POWERLOSS asks for the power-loss tests:
// then it fails.
func mountT(t *testing.T) (*FS, *Mount) {
	t.Helper()
	f := New()
	dir := t.TempDir()
	m, err := f.Mount(dir)
	if err != nil {
		if os.Getenv("SYNCLEDGER_TEST_POWERLOSS") != "" {
			t.Fatalf("SYNCLEDGER_TEST_POWERLOSS is set and FUSE cannot mount: %v", err)
		}
		t.Skipf("FUSE cannot mount here (run as root with /dev/fuse): %v", err)
	}
	t.Cleanup(func() { _ = m.Unmount() })
	return f, m
}

// cut unmounts, drops and mounts again.
func cut(t *testing.T, f *FS, m *Mount) (*Mount, DropStats) {
	t.Helper()
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	st := f.Drop()
	m2, err := f.Mount(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Unmount() })
	return m2, st
}

func writeFile(t *testing.T, p, content string, fsync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if fsync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, p string) {
	t.Helper()
	d, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestDropLosesWhatWasNotSynced(t *testing.T) {
	f, m := mountT(t)
	root := m.Dir
	writeFile(t, filepath.Join(root, "synced"), "durable", true)
	writeFile(t, filepath.Join(root, "unsynced-content"), "lost", false)
	writeFile(t, filepath.Join(root, "tmp"), "renamed", false)
	if err := os.Rename(filepath.Join(root, "tmp"), filepath.Join(root, "renamed-unsynced")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "tmp2"), "renamed", true)
	if err := os.Rename(filepath.Join(root, "tmp2"), filepath.Join(root, "renamed-synced")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "d", "in-unsynced-dir"), "x", true)
	syncDir(t, root) // names synced, d itself never
	writeFile(t, filepath.Join(root, "after-root-sync"), "y", true)
	writeFile(t, filepath.Join(root, "synced"), "changed, not synced", false)

	m, st := cut(t, f, m)
	root = m.Dir
	if st.Nodes == 0 {
		t.Fatal("drop reports nothing lost")
	}
	for _, tc := range []struct {
		name, want string
		exists     bool
	}{
		{"synced", "durable", true},
		{"unsynced-content", "", true}, // named (root synced), content never synced
		{"renamed-unsynced", "", true}, // the classic: rename without fsync
		{"renamed-synced", "renamed", true},
		{"tmp", "", false},
		{"d/in-unsynced-dir", "", false}, // d came back empty
		{"after-root-sync", "", false},   // its name was never synced
	} {
		got, ok := read(t, filepath.Join(root, tc.name))
		if ok != tc.exists || got != tc.want {
			t.Errorf("%s after the cut: %q (exists %v), want %q (exists %v)", tc.name, got, ok, tc.want, tc.exists)
		}
	}
}

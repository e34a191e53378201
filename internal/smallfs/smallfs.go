// Package smallfs gives tests a small filesystem of their own to fill: a tmpfs
// of a given size, mounted for the test (root only). The full-disk tests
// (SYNCLEDGER_TEST_DISKFULL) run on it.
package smallfs

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Env turns the full-disk tests on; they need root (mount -t tmpfs).
const Env = "SYNCLEDGER_TEST_DISKFULL"

// MountT is the opt-in gate and setup of a full-disk test: it skips t unless
// Env is set, and then mounts a tmpfs of size bytes on a temp directory,
// unmounted when t ends. With Env set, a mount that fails fails t: a
// full-disk test asked for never skips.
func MountT(t testing.TB, size int64) string {
	t.Helper()
	if os.Getenv(Env) == "" {
		t.Skip("set " + Env + "=1 to run the full-disk tests (root: they mount a small tmpfs)")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mount(dir, size); err != nil {
		t.Fatalf("%s is set, but a tmpfs of %d bytes cannot be mounted on %s (run as root): %v", Env, size, dir, err)
	}
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes the file name until the filesystem holding it has at most
// leave bytes free (0: until a write finds it full), and returns how many
// bytes it wrote. Removing the file frees them.
func Fill(name string, leave uint64) (int64, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	free, err := Free(filepath.Dir(name))
	if err != nil {
		return 0, err
	}
	if free <= leave {
		return 0, nil
	}
	n, err := io.CopyN(f, zeros{}, int64(free-leave))
	if leave == 0 && isNoSpace(err) {
		err = nil
	}
	if err != nil {
		return n, err
	}
	return n, f.Sync()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

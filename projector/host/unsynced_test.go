//go:build unix

package host

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/syncledger/syncledger/internal/testmain"
)

// TestNotSyncedPublishesNothing is issue 26 points 4 and 9: a path the scan
// reports not synced — a directory replaced by a symlink (its files moved to
// another disk and linked back), a file replaced by a symlink or a FIFO, a
// directory the scan cannot read — publishes nothing about itself or anything
// below it, and never stops the commit of the other paths. Before, the commit
// published the deletion of every indexed file at and under a symlink or FIFO
// (every other host deleted them), and one unreadable directory failed every
// commit and status ("scan cache: open …: file name too long").
//
// Each case commits twice: once scanning the whole cache, once limited to the
// paths a dirty set (or --hint) would name (CommitOptions.Changed).
func TestNotSyncedPublishesNothing(t *testing.T) {
	t.Parallel()
	const (
		fa, fb = "data/m/a", "data/m/b"
		other  = "audit/x" // an unrelated edit: always published
	)
	tests := []struct {
		name    string
		root    bool // runs as root too (root reads every directory)
		break_  func(t *testing.T, root, outside string)
		warned  string   // the path the warning names
		changed []string // what a dirty set reports of the change
	}{
		{"directory replaced by a symlink", true, func(t *testing.T, root, outside string) {
			moved := filepath.Join(outside, "m")
			must(t, os.Rename(filepath.Join(root, "data/m"), moved))
			must(t, os.Symlink(moved, filepath.Join(root, "data/m")))
		}, "data/m", []string{"data/m"}},
		{"file replaced by a symlink", true, func(t *testing.T, root, outside string) {
			moved := filepath.Join(outside, "a")
			must(t, os.Rename(filepath.Join(root, fa), moved))
			must(t, os.Symlink(moved, filepath.Join(root, fa)))
		}, fa, []string{fa}},
		{"file replaced by a FIFO", true, func(t *testing.T, root, outside string) {
			must(t, os.Remove(filepath.Join(root, fa)))
			must(t, syscall.Mkfifo(filepath.Join(root, fa), 0o600))
		}, fa, []string{fa}},
		{"a hint below a symlinked directory", true, func(t *testing.T, root, outside string) {
			moved := filepath.Join(outside, "m")
			must(t, os.Rename(filepath.Join(root, "data/m"), moved))
			must(t, os.Symlink(moved, filepath.Join(root, "data/m")))
		}, "data/m", []string{fa}},
		{"directory whose path is longer than the OS takes", true, func(t *testing.T, root, outside string) {
			deepDir(t, filepath.Join(root, "data/m"))
		}, "data/m/" + strings.Repeat("d", 200), []string{"data/m"}},
		{"unreadable directory", false, func(t *testing.T, root, outside string) {
			must(t, os.Chmod(filepath.Join(root, "data/m"), 0))
			t.Cleanup(func() { os.Chmod(filepath.Join(root, "data/m"), 0o755) })
		}, "data/m", []string{"data/m/a"}},
		{"unreadable file", false, func(t *testing.T, root, outside string) {
			writeAt(t, filepath.Join(root, fa), "changed, unreadable")
			must(t, os.Chmod(filepath.Join(root, fa), 0))
		}, fa, []string{fa}},
	}
	for _, tt := range tests {
		for _, scope := range []string{"whole cache", "dirty set"} {
			t.Run(tt.name+"/"+scope, func(t *testing.T) {
				t.Parallel()
				if !tt.root && os.Geteuid() == 0 {
					t.Skip("root reads every file and directory: the over-long path case covers a directory the scan cannot read")
				}
				e := newEnv(t)
				var logged testmain.SyncBuffer
				a, err := Open(Config{Cache: t.TempDir(), Host: "a", Log: e.log, Blobs: e.blobs,
					Logger: slog.New(slog.NewTextHandler(&logged, nil))})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				b := e.host("b")
				for _, p := range []string{fa, fb, other} {
					writeFile(t, a, p, "first "+p)
				}
				mustCommit(t, a, "")
				mustSync(t, b, SyncOptions{})

				tt.break_(t, a.Dir().Root(), t.TempDir())
				writeFile(t, a, other, "second")
				st := mustStatus(t, a)
				if len(st.Dirty) != 1 || st.Dirty[0] != other {
					t.Errorf("status dirty = %q, want only %s", st.Dirty, other)
				}
				var changed []string
				if scope == "dirty set" {
					changed = append([]string{other}, tt.changed...)
				}
				res, err := a.Commit(context.Background(), CommitOptions{Changed: changed})
				if err != nil {
					t.Fatalf("commit: %v", err)
				}
				if res.Deleted != 0 || len(res.Paths) != 1 || res.Paths[0] != other {
					t.Fatalf("commit published %q (%d deleted), want only %s", res.Paths, res.Deleted, other)
				}
				if !strings.Contains(logged.String(), "not synced") || !strings.Contains(logged.String(), tt.warned) {
					t.Errorf("no warning names %s:\n%s", tt.warned, logged.String())
				}
				mustSync(t, b, SyncOptions{})
				for _, p := range []string{fa, fb} {
					if got, ok := readFile(t, b, p); !ok || got != "first "+p {
						t.Errorf("host b's %s = %q, %v; want it kept", p, got, ok)
					}
				}
				if got, _ := readFile(t, b, other); got != "second" {
					t.Errorf("host b's %s = %q, want the edit", other, got)
				}
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeAt(t *testing.T, p, content string) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

// deepDir makes, under dir, a chain of directories of 200-byte names whose
// path is longer than PATH_MAX (each made relative to its parent, as only a
// program that never names the whole path can), with a file at its end.
func deepDir(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	must(t, err)
	name := strings.Repeat("d", 200)
	for n := len(dir); n <= unix.PathMax+200; n += len(name) + 1 {
		must(t, unix.Mkdirat(fd, name, 0o755))
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	f, err := unix.Openat(fd, "file", unix.O_CREAT|unix.O_WRONLY, 0o644)
	must(t, err)
	unix.Close(f)
	unix.Close(fd)
}

//go:build !windows

package cachefs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
)

// dirSync: a directory is fsynced to make the renames and removals in it
// durable (docs/design.md §9).
const dirSync = true

// The helpers below call the system directly where the os package would add
// work to every file of a bulk apply (B13: about 20 syscalls a file): os.Open
// and os.CreateTemp register each regular file with the poller (four fcntl
// and a failing epoll_ctl), os.Rename stats its target first. They retry on
// EINTR as the os package does (a FUSE file system can be interrupted).

// syncDir fsyncs the directory at p, opened without following a symlink and
// without blocking on anything that is not a directory (O_DIRECTORY): open,
// fsync, close. Something that is no longer a directory holds nothing of the
// cache to sync.
func syncDir(p string) error {
	fd, err := retryEINTR(func() (int, error) {
		return syscall.Open(p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	})
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	if _, err := retryEINTR(func() (int, error) { return 0, syscall.Fsync(fd) }); err != nil {
		return &fs.PathError{Op: "sync", Path: p, Err: err}
	}
	return nil
}

// createTemp creates a new file for writing in dir, named w-<random>, mode
// 0600, as os.CreateTemp(dir, "w-*") does, in one open.
func createTemp(dir string) (*os.File, error) {
	for range 10000 {
		name := dir + "/w-" + strconv.FormatUint(uint64(rand.Uint32()), 10)
		fd, err := retryEINTR(func() (int, error) {
			return syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		})
		if errors.Is(err, syscall.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	return nil, &fs.PathError{Op: "createtemp", Path: dir + "/w-*", Err: fs.ErrExist}
}

// rename renames oldpath to newpath (rename(2): a file never replaces a
// directory, EISDIR).
func rename(oldpath, newpath string) error {
	if _, err := retryEINTR(func() (int, error) { return 0, syscall.Rename(oldpath, newpath) }); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

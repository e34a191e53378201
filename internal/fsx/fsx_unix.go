//go:build unix

package fsx

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// CreateTemp creates a new file for writing in dir, named prefix followed by
// a random string, mode 0600, as os.CreateTemp(dir, prefix+"*") does, in one
// open.
func CreateTemp(dir, prefix string) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		fd, err := retryEINTR(func() (int, error) {
			return syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		})
		if errors.Is(err, syscall.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "createtemp", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// OpenNoFollow opens the file name for reading, as os.Open does, except that
// a symlink is not followed (ELOOP), in one open: the file is not registered
// with the runtime's poller (a regular file never blocks).
func OpenNoFollow(name string) (*os.File, error) {
	fd, err := retryEINTR(func() (int, error) {
		return syscall.Open(name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// SyncDir fsyncs the directory dir (open, fsync, close).
func SyncDir(dir string) error { return syncDir(dir, 0) }

// SyncDirNoFollow is SyncDir on a directory opened without following a
// symlink: a symlink or a non-directory fails with ENOTDIR (or, for a
// symlink on some systems, ELOOP).
func SyncDirNoFollow(dir string) error { return syncDir(dir, syscall.O_NOFOLLOW) }

func syncDir(dir string, flags int) error {
	fd, err := retryEINTR(func() (int, error) {
		return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|flags, 0)
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	_, err = retryEINTR(func() (int, error) { return 0, syscall.Fsync(fd) })
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		return &fs.PathError{Op: "close", Path: dir, Err: cerr}
	}
	if err != nil {
		return &fs.PathError{Op: "sync directory", Path: dir, Err: err}
	}
	return nil
}

// Rename renames oldpath to newpath (rename(2): a file never replaces a
// directory, EISDIR).
func Rename(oldpath, newpath string) error {
	if _, err := retryEINTR(func() (int, error) { return 0, syscall.Rename(oldpath, newpath) }); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// retryEINTR calls f again while a signal interrupts it.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// FileID returns the device and inode of the file fi describes: two names
// of one file have the same, a copy has others.
func FileID(fi os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true // Dev is int32 on darwin
}

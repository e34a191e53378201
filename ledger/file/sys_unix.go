//go:build unix

package file

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// createTemp creates a new temporary file in dir for writing, as
// os.CreateTemp(dir, tmpPrefix+"*") does, with plain syscalls: os.OpenFile
// tries to register a regular file with the poller (two fcntl, a failing
// epoll_ctl and two more fcntl to undo it), which on a small put costs more
// than the write.
func createTemp(dir string) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, tmpPrefix+strconv.FormatUint(rand.Uint64(), 36))
		fd, err := retryEINTR(func() (int, error) {
			return syscall.Open(name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		})
		if err == syscall.EEXIST {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "createtemp", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	return nil, &os.PathError{Op: "createtemp", Path: filepath.Join(dir, tmpPrefix+"*"), Err: os.ErrExist}
}

// syncDir fsyncs dir, making the names created or renamed in it durable
// (three syscalls: os.Open of a directory adds the poller's five).
func syncDir(dir string) error {
	fd, err := retryEINTR(func() (int, error) {
		return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	_, err = retryEINTR(func() (int, error) { return 0, syscall.Fsync(fd) })
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		return &os.PathError{Op: "close", Path: dir, Err: cerr}
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// retryEINTR calls f again while it is interrupted by a signal, as package os
// does around its own calls (a FUSE file system may return EINTR).
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

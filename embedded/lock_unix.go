//go:build unix

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the name of the lock file Start creates in the data directory.
const LockFile = "serve.lock"

// dirLock is an exclusive flock on DataDir/LockFile. flock locks belong to the open
// file description, so a second lock attempt fails even from the same process, and
// the kernel drops the lock when the process dies: no stale locks after a crash.
type dirLock struct {
	f *os.File
}

// lockDir takes the lock on dir without blocking. If another open file holds it,
// the error is a *DirInUseError naming the holder's pid as written in the file.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DirInUseError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	// Record the owner for the next process that finds the directory locked. The
	// file is never removed: removing a lock file races with its next opener.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		_ = f.Sync()
	}
	return &dirLock{f: f}, nil
}

// readPID returns the pid recorded in the lock file, 0 if unreadable (the holder
// may not have written it yet).
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// release drops the lock. The pid stays in the file; it is only read while the
// lock is held by someone.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

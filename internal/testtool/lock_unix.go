//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package testtool

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on the file name, creating it, and returns
// its release. It does not fail: without the lock the builds only repeat work.
func lockFile(name string) (unlock func()) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return func() {}
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	return func() {
		if err == nil {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		f.Close()
	}
}

//go:build !unix

package embedded

import (
	"errors"
	"fmt"
)

// LockFile is the name of the lock file Start creates in the data directory.
const LockFile = "serve.lock"

type dirLock struct{}

// lockDir is not implemented on this platform: without a lock two servers could
// share a data directory, so Start refuses to run rather than risk it.
func lockDir(dir string) (*dirLock, error) {
	return nil, fmt.Errorf("lock data directory %s: %w", dir, errors.ErrUnsupported)
}

func (l *dirLock) release() {}

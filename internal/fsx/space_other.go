//go:build !(linux || darwin || freebsd || windows)

package fsx

import (
	"errors"
	"runtime"
	"syscall"
)

var noSpaceErrnos = []error{syscall.ENOSPC}

// DiskSpace is not implemented here.
func DiskSpace(string) (free, size uint64, noInodes bool, err error) {
	return 0, 0, false, errors.New("free space is not read on " + runtime.GOOS)
}

//go:build !(linux || darwin || freebsd)

package embedded

import (
	"errors"
	"runtime"
)

// statDisk is not implemented here: the disk watch stays off.
func statDisk(string) (free, size uint64, noInodes bool, err error) {
	return 0, 0, false, errors.New("free space is not read on " + runtime.GOOS)
}

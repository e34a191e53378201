package fsx

import "errors"

// NoSpace reports whether err is a write that failed for lack of space: the
// filesystem is full (ENOSPC; ERROR_DISK_FULL on Windows) or the user's quota
// is (EDQUOT).
func NoSpace(err error) bool {
	for _, e := range noSpaceErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

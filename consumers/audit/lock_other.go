//go:build !unix

package audit

import "os"

// lockFile opens path; other systems get no inter-process lock.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}

//go:build !windows

package cachefs

import (
	"errors"
	"os"
	"syscall"
)

// dirSync: a directory is fsynced to make the renames and removals in it
// durable (docs/design.md §9).
const dirSync = true

// syncDir fsyncs the directory at p, opened without following a symlink and
// without blocking on anything that is not a directory (O_DIRECTORY): one
// open instead of syncFile's lstat and open. Something that is no longer a
// directory holds nothing of the cache to sync.
func syncDir(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

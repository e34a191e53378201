package cachefs

import (
	"errors"
	"syscall"

	"github.com/syncledger/syncledger/internal/fsx"
)

// dirSync: a directory is fsynced to make the renames and removals in it
// durable (docs/design.md §9); not on Windows (fsx.DirSync).
const dirSync = fsx.DirSync

// syncDir fsyncs the directory at p, opened without following a symlink.
// Something that is no longer a directory holds nothing of the cache to sync.
func syncDir(p string) error {
	err := fsx.SyncDirNoFollow(p)
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return nil
	}
	return err
}

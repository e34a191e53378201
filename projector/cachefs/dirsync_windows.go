package cachefs

import "os"

// dirSync is false on Windows: a directory handle cannot be flushed
// (FlushFileBuffers needs write access, which a directory handle does not
// give), and NTFS journals renames and removals itself (docs/design.md §9).
const dirSync = false

// syncDir does nothing on Windows (dirSync).
func syncDir(string) error { return nil }

// createTemp is os.CreateTemp(dir, "w-*").
func createTemp(dir string) (*os.File, error) { return os.CreateTemp(dir, "w-*") }

// rename is os.Rename.
func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

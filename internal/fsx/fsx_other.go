//go:build !unix

package fsx

import (
	"io/fs"
	"os"
)

// CreateTemp is os.CreateTemp(dir, prefix+"*").
func CreateTemp(dir, prefix string) (*os.File, error) { return os.CreateTemp(dir, prefix+"*") }

// SyncDir fsyncs the directory dir; nothing on Windows (DirSync).
func SyncDir(dir string) error {
	if !DirSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return &fs.PathError{Op: "sync directory", Path: dir, Err: err}
	}
	return d.Close()
}

// SyncDirNoFollow is SyncDir: this platform has no O_NOFOLLOW for a directory.
func SyncDirNoFollow(dir string) error { return SyncDir(dir) }

// OpenNoFollow is os.Open: this platform has no O_NOFOLLOW (the callers
// lstat the path first).
func OpenNoFollow(name string) (*os.File, error) { return os.Open(name) }

// Rename is os.Rename.
func Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// FileID: this platform tells no file identity (ok false).
func FileID(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }

package fsx

import (
	"io/fs"
	"os"
	"path/filepath"
)

// WriteDurably writes dir/name through write on a temporary file in dir,
// fsynced, renamed into place, and the directory fsynced: once it returns
// nil the file holds what write wrote, across a power loss; before, name
// holds what it held. On an error the temporary file is removed.
func WriteDurably(dir, name string, write func(*os.File) error) error {
	f, err := CreateTemp(dir, "."+name+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// RemoveEmptyDirs removes the empty directories at and under dir, deepest
// first; a directory that is not empty stays (its os.Remove fails), and so
// does everything in it.
func RemoveEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i]) // fails on a directory that is not empty
	}
}

package fsx

import (
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

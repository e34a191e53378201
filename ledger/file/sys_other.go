//go:build !unix

package file

import (
	"fmt"
	"os"
	"runtime"
)

func createTemp(dir string) (*os.File, error) { return os.CreateTemp(dir, tmpPrefix+"*") }

// syncDir fsyncs dir, making the names created or renamed in it durable. Not
// on Windows: a directory handle cannot be flushed, and NTFS journals the
// metadata (docs/design.md §9).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

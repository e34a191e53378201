package cachefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/syncledger/syncledger/projector/ignore"
)

// ignoreCache holds the rules Ignore last read and what their file was then
// (nil: absent), so that a scan of a few paths (a commit with hints) pays one
// stat for them, not a read and a parse.
type ignoreCache struct {
	mu sync.Mutex
	m  *ignore.Matcher
	fi fs.FileInfo
}

// racyWindow: rules read from a file modified less than this before the read
// are not kept. A write within the file system's mtime granularity of the
// read (2 s on FAT) could leave its size and mtime as they were (git's "racy
// clean" index entries); a file older than this changes its mtime when
// written.
const racyWindow = 2 * time.Second

// Ignore returns the cache's ignore rules (its .syncledgerignore after the
// defaults) as the file holds them now: read again when the file is not the
// one last read (another file, size or mtime), else the rules read then.
func (d *Dir) Ignore() (*ignore.Matcher, error) {
	c := &d.ign
	fi, err := os.Stat(filepath.Join(d.root, ignore.FileName)) // as ignore.Load reads it
	if errors.Is(err, fs.ErrNotExist) {
		fi, err = nil, nil
	}
	if err != nil {
		return ignore.Load(d.root) // says why it cannot be read
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m != nil && sameFile(c.fi, fi) {
		return c.m, nil
	}
	now := time.Now()
	m, err := ignore.Load(d.root)
	if err != nil {
		return nil, err
	}
	c.m, c.fi = nil, nil
	if fi == nil || now.Sub(fi.ModTime()) > racyWindow {
		c.m, c.fi = m, fi
	}
	return m, nil
}

// sameFile reports whether a and b (nil: absent) are one file, unchanged.
func sameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

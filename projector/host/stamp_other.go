//go:build !linux && !darwin

package host

import (
	"io/fs"
	"time"
)

// ctime is fi's change time: zero, this system's is not read (Prepared
// then compares the file's identity, size, mode and mtime).
func ctime(fs.FileInfo) time.Time { return time.Time{} }

// stampLag: the most a file's times are taken to lag the clock here.
var stampLag = maxStampLag

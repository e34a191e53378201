package cachefs

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system holding f (syncfs(2)).
func syncFS(f *os.File) error { return unix.Syncfs(int(f.Fd())) }

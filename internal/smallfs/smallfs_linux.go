//go:build linux

package smallfs

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

func mount(dir string, size int64) error {
	return unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)+",mode=0700")
}

func unmount(dir string) error { return unix.Unmount(dir, unix.MNT_DETACH) }

// Free returns the bytes free on dir's filesystem (to an unprivileged user).
func Free(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func isNoSpace(err error) bool { return errors.Is(err, unix.ENOSPC) }

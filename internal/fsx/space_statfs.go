//go:build linux || darwin || freebsd

package fsx

import "golang.org/x/sys/unix"

var noSpaceErrnos = []error{unix.ENOSPC, unix.EDQUOT}

// DiskSpace returns the bytes free to an unprivileged user and in all on the
// filesystem holding dir, and whether it has no inode left (nothing can be
// created there either).
func DiskSpace(dir string) (free, size uint64, noInodes bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, false, err
	}
	bs := uint64(st.Bsize)
	// Files is 0 on filesystems without an inode count (btrfs, …).
	return uint64(st.Bavail) * bs, uint64(st.Blocks) * bs, st.Files > 0 && st.Ffree == 0, nil
}

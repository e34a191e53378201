//go:build linux || darwin || freebsd

package embedded

import "golang.org/x/sys/unix"

// statDisk returns the bytes free to an unprivileged user and in all on dir's
// filesystem, and whether it has no inode left (a full disk too: nothing can
// be created).
func statDisk(dir string) (free, size uint64, noInodes bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, false, err
	}
	bs := uint64(st.Bsize)
	// Files is 0 on filesystems without an inode count (btrfs, …).
	return uint64(st.Bavail) * bs, uint64(st.Blocks) * bs, st.Files > 0 && st.Ffree == 0, nil
}

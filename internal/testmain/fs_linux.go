package testmain

import "golang.org/x/sys/unix"

// usable reports whether dir is a writable tmpfs with MinFree bytes free that
// allows executing files (Docker mounts a 64 MiB noexec /dev/shm by default).
func usable(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	if st.Type != unix.TMPFS_MAGIC || st.Flags&(unix.ST_NOEXEC|unix.ST_RDONLY) != 0 {
		return false
	}
	if st.Bavail*uint64(st.Bsize) < MinFree {
		return false
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}

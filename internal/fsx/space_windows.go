package fsx

import (
	"golang.org/x/sys/windows"
)

var noSpaceErrnos = []error{windows.ERROR_DISK_FULL, windows.ERROR_HANDLE_DISK_FULL}

// DiskSpace returns the bytes free to the caller and in all on the volume
// holding dir (Windows has no inode count).
func DiskSpace(dir string) (free, size uint64, noInodes bool, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, false, err
	}
	var avail, total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &totalFree); err != nil {
		return 0, 0, false, err
	}
	return avail, total, false, nil
}

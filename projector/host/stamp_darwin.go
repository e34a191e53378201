package host

import (
	"io/fs"
	"syscall"
	"time"
)

// ctime is fi's change time (zero when the system does not say it): a
// write, a chmod, a rename, and times set back (touch -d, rsync -t) all
// move it.
func ctime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctimespec.Unix())
	}
	return time.Time{}
}

// stampLag: the most a file's times are taken to lag the clock here.
var stampLag = maxStampLag

package host

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ctime is fi's change time (zero when the system does not say it): a
// write, a chmod, a rename, and times set back (touch -d, rsync -t) all
// move it.
func ctime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Unix())
	}
	return time.Time{}
}

// stampLag: Linux stamps a file with its coarse clock (the time of the last
// tick: CLOCK_REALTIME_COARSE, 1–10 ms by the kernel's HZ), which lags the
// time by less than its resolution; a millisecond more for room. Where the
// resolution cannot be read, maxStampLag.
var stampLag = func() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &ts); err != nil || ts.Nano() <= 0 {
		return maxStampLag
	}
	return min(time.Duration(ts.Nano())+time.Millisecond, maxStampLag)
}()

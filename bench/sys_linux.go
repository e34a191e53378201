//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat CPU times: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// selfCPU is this process's user+system CPU time (microsecond resolution).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is another process's user+system CPU time from /proc/<pid>/stat, in
// clock ticks (10 ms resolution); 0 if unknown.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces), from field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14, utime
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	return time.Duration(ut+st) * clockTick
}

// resetPeakRSS resets this process's peak RSS (VmHWM) to its current RSS
// (/proc/self/clear_refs, "5"). It reports whether the kernel allowed it.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is this process's peak resident set size (VmHWM) in bytes; 0 if unknown.
func peakRSS() int64 { return statusKB("/proc/self/status", "VmHWM:") }

func statusKB(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// rusageOf returns the CPU time and peak RSS (bytes) of an exited child from
// its wait4 rusage.
func rusageOf(ps *os.ProcessState) (cpu time.Duration, maxRSS int64) {
	if ps == nil {
		return 0, 0
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return ps.UserTime() + ps.SystemTime(), 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Maxrss << 10 // Linux: KiB
}

// childAttr makes a child process die with the harness.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() [3]float64 {
	var la [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return la
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		la[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return la
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// memTotal is the machine's memory in bytes.
func memTotal() int64 { return statusKB("/proc/meminfo", "MemTotal:") }

// kernel is the kernel release.
func kernel() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return "unknown"
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return "Linux " + b.String()
}

// fsType names the file system holding dir (tmpfs or not).
func fsType(dir string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return "unknown"
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return "fs 0x" + strconv.FormatInt(int64(st.Type), 16)
}

// childPeakRSS runs cmd (not yet started; its output should not be a pipe) to
// completion under ptrace and returns its own peak RSS in bytes, its VmHWM read
// when it is about to exit. The wait4 rusage cannot say it: os/exec starts a
// child with vfork, and the kernel charges the child the parent's peak RSS at
// exec, so a small child of the harness looks as large as the harness.
func childPeakRSS(cmd *exec.Cmd) (int64, error) {
	runtime.LockOSThread() // every ptrace call from the thread that started it
	defer runtime.UnlockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil { // the stop at exec
		return 0, err
	}
	if err := syscall.PtraceSetOptions(pid, syscall.PTRACE_O_TRACEEXIT); err != nil {
		_ = cmd.Process.Kill()
		return 0, err
	}
	if err := syscall.PtraceCont(pid, 0); err != nil {
		return 0, err
	}
	var hwm int64
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			return 0, err
		}
		if ws.Exited() || ws.Signaled() {
			break
		}
		sig := 0
		if ws.Stopped() && ws.StopSignal() == syscall.SIGTRAP && ws.TrapCause() == syscall.PTRACE_EVENT_EXIT {
			hwm = statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")
		} else if ws.Stopped() && ws.StopSignal() != syscall.SIGTRAP {
			sig = int(ws.StopSignal())
		}
		if err := syscall.PtraceCont(pid, sig); err != nil {
			return 0, err
		}
	}
	_ = cmd.Process.Release()
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return hwm, fmt.Errorf("%s: %v", strings.Join(cmd.Args, " "), ws)
	}
	return hwm, nil
}

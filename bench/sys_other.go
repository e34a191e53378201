//go:build !linux

package bench

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Off Linux the harness runs, but reports no server CPU and no peak RSS.

func selfCPU() time.Duration                    { return 0 }
func procCPU(int) time.Duration                 { return 0 }
func resetPeakRSS() bool                        { return false }
func peakRSS() int64                            { return 0 }
func childAttr() *syscall.SysProcAttr           { return nil }
func loadAvg() [3]float64                       { return [3]float64{} }
func cpuModel() string                          { return "unknown" }
func memTotal() int64                           { return 0 }
func kernel() string                            { return runtime.GOOS }
func fsType(string) string                      { return "unknown" }
func childPeakRSS(cmd *exec.Cmd) (int64, error) { return 0, cmd.Run() }
func rusageOf(ps *os.ProcessState) (time.Duration, int64) {
	if ps == nil {
		return 0, 0
	}
	return ps.UserTime() + ps.SystemTime(), 0
}

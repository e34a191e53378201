package testtool

import "syscall"

// sysProcAttr has the kernel kill the process if the test process dies without
// stopping it (a test timeout's panic runs no cleanup).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

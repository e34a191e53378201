//go:build !linux

package testtool

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

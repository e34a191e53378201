//go:build !linux

package gcstest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

//go:build !linux

package testmain

// usable reports false: only Linux has a /dev/shm to use.
func usable(string) bool { return false }

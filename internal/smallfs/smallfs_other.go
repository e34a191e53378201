//go:build !linux

package smallfs

import "errors"

var errLinuxOnly = errors.New("the full-disk tests mount a tmpfs: Linux only")

func mount(string, int64) error   { return errLinuxOnly }
func unmount(string) error        { return errLinuxOnly }
func Free(string) (uint64, error) { return 0, errLinuxOnly }
func isNoSpace(error) bool        { return false }

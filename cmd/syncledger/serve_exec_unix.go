//go:build !server && unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// execServer replaces this process with the server binary: the same pid (the
// one serve prints and records in its data directory's lock), environment and
// standard streams, and its exit code.
func execServer(bin string, argv []string) error {
	if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	return nil // not reached
}

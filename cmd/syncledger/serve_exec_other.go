//go:build !server && !unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// execServer runs the server binary as a child with this process's
// environment and standard streams, and exits with its exit code (there is no
// exec here to replace this process).
func execServer(bin string, argv []string) error {
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	os.Exit(0)
	return nil
}

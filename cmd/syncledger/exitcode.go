package main

import (
	"errors"
	"fmt"

	"github.com/syncledger/syncledger/ledger"
)

// Exit codes: the one place they are defined. README.md "Exit codes" documents them;
// keep the two in step.
const (
	exitOK       = 0 // success
	exitError    = 1 // any failure not listed below
	exitUsage    = 2 // bad command line, flag value or environment variable
	exitConflict = 3 // a commit lost a chain race with another host and could not be retried (ledger.ErrConflict)
	exitRebuild  = 4 // the log no longer holds the events needed: rebuild from a snapshot (ledger.ErrTruncated)
)

// usageError marks an error in how the command was invoked (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit 2).
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// codeError makes a command exit with a code of its choosing (exec passes its
// child's code through). A nil err exits silently.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *codeError) Unwrap() error { return e.err }

// withExitCode returns an error that makes the process exit with code; err (may be
// nil) is printed as usual.
func withExitCode(code int, err error) error { return &codeError{code: code, err: err} }

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	var ee *codeError
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, ledger.ErrConflict):
		return exitConflict
	case errors.Is(err, ledger.ErrTruncated):
		return exitRebuild
	default:
		return exitError
	}
}

// silent reports whether err should exit without a message.
func silent(err error) bool {
	var ee *codeError
	return errors.As(err, &ee) && ee.err == nil
}

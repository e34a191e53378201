package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/statedb"
)

// Exit codes: the one place they are defined. README.md "Exit codes" documents them;
// keep the two in step.
const (
	exitOK       = 0 // success
	exitError    = 1 // any failure not listed below
	exitUsage    = 2 // bad command line, flag value or environment variable
	exitConflict = 3 // local changes meet remote ones: a commit's paths changed remotely, a sync would overwrite uncommitted files (ledger.ErrConflict)
	exitRebuild  = 4 // rebuild: the log no longer holds the events needed (ledger.ErrTruncated), or the cache's state database is damaged (statedb.ErrCorrupt)

	// exitSwampFindings: a swamp command ran but the job is not done: an import
	// that left files out, a doctor that found an unhealthy cache (and did not
	// repair it).
	exitSwampFindings = 5
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
	case errors.Is(err, ledger.ErrTruncated), errors.Is(err, statedb.ErrCorrupt):
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

// errorReport is what a command run with --json prints on stdout when it fails,
// in place of any result: {"error": {...}}, one object on one line. A command
// whose outcome is a report with its own exit code (verify, swamp doctor, swamp
// import: a codeError) prints that report instead.
type errorReport struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code     int            `json:"code"`     // the process's exit code
	Kind     string         `json:"kind"`     // see errorKind
	Message  string         `json:"message"`  // what stderr says
	Paths    []string       `json:"paths"`    // the files the failure is about; [] if none
	Commands []string       `json:"commands"` // command lines that lead out of it; [] if none
	Detail   map[string]any `json:"detail,omitempty"`
}

// pather is an error about particular files.
type pather interface{ ErrorPaths() []string }

// newErrorObject describes err (exit code, kind, paths, commands) for --json.
func newErrorObject(err error) errorObject {
	o := errorObject{Code: exitCode(err), Kind: errorKind(err), Message: err.Error(), Paths: []string{}, Commands: errorCommands(err)}
	var (
		hc *host.ConflictError
		lc *host.LocalChangesError
		lp pather
		cf *ledger.ConflictError
		tr *ledger.TruncatedError
	)
	switch {
	case errors.As(err, &hc):
		o.Paths = hc.Paths
	case errors.As(err, &lc):
		o.Paths = lc.Paths
	case errors.As(err, &lp):
		o.Paths = lp.ErrorPaths()
	}
	switch {
	case errors.As(err, &cf):
		o.Detail = map[string]any{"partition": cf.Partition, "expected": cf.Expected, "actual": cf.Actual}
	case errors.As(err, &tr):
		o.Detail = map[string]any{"from": tr.From, "first": tr.First}
	}
	var full *ledger.ServerFullError
	if errors.As(err, &full) && full.State.Full {
		st := full.State
		o.Detail = map[string]any{"dir": st.Dir, "free": st.Free, "size": st.Size, "reserve": st.Reserve, "resume": st.Resume, "need": st.Need(), "stored": st.Stored}
	}
	var ns *host.NoSpaceError
	if errors.As(err, &ns) {
		o.Detail = map[string]any{"dir": ns.Dir, "free": ns.Free, "need": ns.Need, "files": ns.Files, "from": ns.From, "to": ns.To}
	}
	var pc *host.PartialCommitError
	if errors.As(err, &pc) {
		// The commits of a split change published before the failure.
		if o.Detail == nil {
			o.Detail = map[string]any{}
		}
		o.Detail["published"] = pc.Published
	}
	return o
}

// errorKind names the kind of failure, finer than the exit code: usage,
// conflict (a commit's paths changed remotely too), local-changes (a sync or
// rebuild would overwrite them), rebuild (the log no longer holds the events),
// damaged-state (the cache's state database is damaged: rebuild),
// lineage, permission, no-answer (the NATS server or the blob store gave no
// answer within --wait: host.WaitError), server-full (the server refused a write for lack of
// space: see errorNote), cache-full (a pull stopped on the cache's full disk),
// busy (another process holds the cache), not-found,
// bad-message (a message of the ledger every reader stops at: see quarantine),
// invalid (bad input), checksum, or error.
func errorKind(err error) string {
	var (
		ue *usageError
		re *ledger.RecordError
	)
	switch {
	case errors.As(err, &ue):
		return "usage"
	case errors.As(err, &re):
		return "bad-message"
	case errors.As(err, new(*host.WaitError)):
		return "no-answer"
	case errors.Is(err, host.ErrLocalChanges):
		return "local-changes"
	case errors.Is(err, ledger.ErrConflict):
		return "conflict"
	case errors.Is(err, ledger.ErrTruncated):
		return "rebuild"
	case errors.Is(err, statedb.ErrCorrupt):
		return "damaged-state"
	case errors.Is(err, ledger.ErrLineage):
		return "lineage"
	case errors.Is(err, ledger.ErrPermission):
		return "permission"
	case errors.Is(err, ledger.ErrServerFull):
		return "server-full"
	case errors.As(err, new(*host.NoSpaceError)):
		return "cache-full"
	case errors.Is(err, statedb.ErrLocked):
		return "busy"
	case errors.Is(err, ledger.ErrRewound):
		return "rewound"
	case errors.Is(err, ledger.ErrNotFound):
		return "not-found"
	case errors.Is(err, ledger.ErrChecksum):
		return "checksum"
	case errors.Is(err, ledger.ErrInvalid), errors.Is(err, ledger.ErrUnknownVersion), errors.Is(err, ledger.ErrTooLarge):
		return "invalid"
	default:
		return "error"
	}
}

// printErrorJSON writes err's error object as one line.
func printErrorJSON(w io.Writer, err error) {
	_ = writeJSON(w, errorReport{newErrorObject(err)})
}

// wantsJSON reports whether the command line asked for --json: the executed
// command's flag once parsed, else (the parse failed) the raw arguments before "--".
func wantsJSON(cmd *cobra.Command, args []string, parsed bool) bool {
	if parsed && cmd != nil {
		f := cmd.Flags().Lookup("json")
		return f != nil && f.Value.String() == "true"
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

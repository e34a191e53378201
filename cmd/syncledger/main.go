// Command syncledger keeps the caches of many hosts in step through a shared
// ledger: commits are JetStream events, file content lives in a blob store.
//
// Each subcommand lives in its own file and is a func(*app) *cobra.Command listed
// in commands below; app (app.go) gives it the global flags, the NATS connection,
// the opened ledger log and the blob store. Exit codes are in exitcode.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
)

// commands are the subcommands, in help order.
var commands = []func(*app) *cobra.Command{
	newServeCmd,
	newInitCmd,
	newUpgradeCmd,
	newLogCmd,
	newSyncCmd,
	newCommitCmd,
	newResolveCmd,
	newStatusCmd,
	newExecCmd,
	newWatchCmd,
	newVerifyCmd,
	newFetchCmd,
	newSnapshotCmd, newRebuildCmd, newReplayCmd, newGCCmd, newQuarantineCmd,
	newBackupCmd, newRestoreCmd,
	newConsumeCmd, newTailCmd, newHostsCmd, newMirrorCmd,
	newSwampCmd,
	newConfigCmd,
	newUICmd,
	newVersionCmd,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, the default action returns: a second Ctrl-C kills.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code. Errors are
// printed to stderr as "syncledger: <message>".
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := newApp(stdout, stderr, getenv)
	defer a.close()
	root := newRootCmdFor(a, args)
	if err := serveHandOff(ctx, a, root, args); err != nil {
		fmt.Fprintf(a.stderr, "syncledger: %v\n", err)
		return exitCode(err)
	}
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	stdout, stderr = a.stdout, a.stderr // secrets scrubbed: the one place output leaves (secrets.go)

	cmd, err := root.ExecuteContextC(ctx)
	if cause := a.aborted(); err != nil && cause != nil && !errors.Is(err, ledger.ErrPermission) {
		err = fmt.Errorf("%w (%v)", cause, err)
	}
	var refused *ledger.BucketError
	switch {
	case errors.As(err, &refused) && errors.Is(refused, ledger.ErrPermission):
		err = fmt.Errorf("%w (the blob store refused this process's credentials: see docs/ops.md, Blob store credentials)", err)
	case errors.Is(err, ledger.ErrPermission):
		err = fmt.Errorf("%w (this NATS user lacks the permission: see docs/ops.md, Permissions)", err)
	}
	if err != nil && !a.started {
		// Cobra failed before the command ran: unknown command, bad flag, wrong
		// arguments.
		var ue *usageError
		if !errors.As(err, &ue) {
			err = &usageError{err}
		}
	}
	if err != nil && !silent(err) {
		err = withNote(a.withServerState(ctx, err))
		fmt.Fprintf(stderr, "syncledger: %v\n", err)
		for _, c := range errorCommands(err) {
			fmt.Fprintf(stderr, "  way out: %s\n", c)
		}
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "Run 'syncledger --help' for usage.")
		}
		// With --json a failure prints one error object on stdout, never a
		// result; a command whose outcome is a report with its own exit code
		// (a codeError) printed that report.
		var ce *codeError
		if wantsJSON(cmd, args, a.started) && !errors.As(err, &ce) {
			printErrorJSON(stdout, err)
		}
	}
	return exitCode(err)
}

// hotCommands are the commands scripts and the swamp extension run all the
// time, by name. A command line that starts with one builds only it under the
// root: building the whole tree (every command's flags) was 4% of a no-op
// sync's CPU (issue 17). The rest of the tree is added when something needs it
// (completeTree: the configuration file's keys are checked against it).
var hotCommands = map[string]func(*app) *cobra.Command{
	"sync": newSyncCmd, "commit": newCommitCmd, "status": newStatusCmd, "version": newVersionCmd,
}

// newRootCmdFor is newRootCmd for the command line args: the root and its hot
// command only, if args start with one.
func newRootCmdFor(a *app, args []string) *cobra.Command {
	if len(args) == 0 || hotCommands[args[0]] == nil {
		return newRootCmd(a)
	}
	root := newBareRootCmd(a)
	root.AddCommand(hotCommands[args[0]](a))
	a.completeTree = func() {
		a.completeTree = nil
		for _, mk := range commands {
			if c := mk(a); c.Name() != args[0] {
				root.AddCommand(c)
			}
		}
	}
	return root
}

// newRootCmd returns the root with every command.
func newRootCmd(a *app) *cobra.Command {
	root := newBareRootCmd(a)
	for _, mk := range commands {
		root.AddCommand(mk(a))
	}
	return root
}

// cobra's template functions are one map for the process: registered once,
// not by each root command (tests build them in parallel: concurrent map
// writes).
func init() { cobra.AddTemplateFunc("syncledgerVersion", versionString) }

// newBareRootCmd returns the root command, with the global flags and no
// subcommand.
func newBareRootCmd(a *app) *cobra.Command {
	// A subcommand's own PersistentPreRunE must not replace the root's, which
	// applies the environment fallbacks.
	cobra.EnableTraverseRunHooks = true
	root := &cobra.Command{
		Use:   "syncledger",
		Short: "Keep many hosts' datastore caches in step through a shared ledger",
		Long: `syncledger keeps the caches of many hosts in step through a shared ledger.

A ledger is a JetStream stream of commits (which files changed, by content hash)
plus a content-addressed blob store (a directory, S3, GCS or a NATS object store).
Each host keeps a cache directory and a high-water mark that only moves once every
earlier commit is applied to its files.

Global flags fall back to environment variables, listed with each flag.
--json output is JSON Lines: one compact JSON value per line (one line for a
result, one per item for log, tail, watch and consume dead-letters; pipe it to
jq . to indent it).
Exit codes: 0 ok, 1 error, 2 usage, 3 conflict, 4 needs a snapshot rebuild,
5 ran but not done (swamp import, swamp doctor); exec passes its command's code.`,
		Version:           "set by the version template", // versionString, read only when printed
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.resolve(cmd); err != nil {
				return err
			}
			// A refused operation is only reported asynchronously; one that no
			// operation claimed (natsjs.Config.Refused, nats_auth.go
			// natsRefused) ends the command at once instead of letting the
			// request wait for its timeout.
			ctx, cancel := context.WithCancelCause(cmd.Context())
			cmd.SetContext(ctx)
			a.abort.mu.Lock()
			a.abort.cancel = cancel
			a.abort.mu.Unlock()
			a.started = true
			return nil
		},
	}
	root.SetVersionTemplate("{{syncledgerVersion}}\n")
	a.addGlobalFlags(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.CompletionOptions.HiddenDefaultCmd = true
	return root
}

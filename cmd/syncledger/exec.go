package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

func newExecCmd(a *app) *cobra.Command {
	var (
		o         scope
		onFailure bool
	)
	cmd := &cobra.Command{
		Use:   "exec [--model TYPE:ID]… -- CMD [ARGS…]",
		Short: "Sync, run a command against the cache, commit what it changed",
		Long: `Exec does what swamp does around a command: it syncs the cache (scoped to the
given models, else full), runs CMD with SYNCLEDGER_CACHE set to the cache's path,
then commits whatever the cache holds that differs from the ledger.

CMD's exit code is passed through. When CMD fails (exits non-zero), what it
wrote is still committed by default, with a warning saying so: a failed swamp
run's outputs, logs and run records are data the other hosts need (to see the
failure, to retry against the same state). --commit-on-failure=false leaves a
failed CMD's changes uncommitted instead, for 'syncledger commit' or to be
discarded by hand. A failed commit makes exec exit non-zero with the reason, and
the local files are kept.`,
		Example: `  syncledger exec --model command/shell:consumer -- swamp model method run consumer execute
  syncledger exec --commit-on-failure=false -- ./migrate.sh`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runExec(cmd.Context(), a, o, onFailure, args) },
	}
	o.addFlags(cmd.Flags(), "sync")
	cmd.Flags().BoolVar(&onFailure, "commit-on-failure", true, "commit what CMD changed even when it exits non-zero")
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func runExec(ctx context.Context, a *app, o scope, commitOnFailure bool, argv []string) error {
	parts, h, err := a.scopedHost(ctx, o)
	if err != nil {
		return err
	}
	res, err := h.Sync(ctx, host.SyncOptions{Partitions: parts})
	if err != nil {
		return fmt.Errorf("sync before %s: %w", argv[0], err)
	}
	a.beat(ctx, "exec", res.HWM, res.Head)
	// The cache stays held while the command runs: nothing (a watch) changes it
	// under the command, and its commit is made against what it saw.
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, a.rawStdout, a.stderr // its output is its own: byte for byte (its messages, on stderr, scrubbed)
	c.Env = append(os.Environ(), "SYNCLEDGER_CACHE="+h.Dir().Root())
	runErr := c.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(runErr, &ee):
		code = ee.ExitCode()
		if code < 0 {
			code = 128 + 9 // killed by a signal
		}
	case runErr != nil:
		return fmt.Errorf("run %s: %w", argv[0], runErr)
	}
	msg := "exec " + argv[0]
	if code != 0 {
		if !commitOnFailure {
			a.logger.Warn("the command failed: its changes are left uncommitted (--commit-on-failure=false); 'syncledger commit' publishes them",
				"command", argv[0], "exit", code)
			return withExitCode(code, nil)
		}
		a.logger.Warn("the command failed: committing what it wrote, as other hosts need a failed run's outputs (--commit-on-failure=false to leave them uncommitted)",
			"command", argv[0], "exit", code)
		msg += fmt.Sprintf(" (exit %d)", code)
	}
	// Commit even when ctx was cancelled by a signal: the command's writes are kept.
	bg := context.WithoutCancel(ctx)
	round := dirty.Begin(bg, h.Dir().Root(), nil, a.logger)
	cres, err := h.Commit(bg, host.CommitOptions{Message: msg, Changed: round.Changed, MaxPaths: printedPaths})
	if err != nil {
		return fmt.Errorf("commit after %s (exit %d): %w", argv[0], code, err)
	}
	round.Ack(bg, false)
	a.noteSplit(cres)
	if !cres.Nothing {
		a.logger.Info("committed", "commit", cres.Commit, "commits", len(cres.Commits), "files", cres.Written, "deleted", cres.Deleted, "seqs", cres.Seqs)
	}
	if code != 0 {
		return withExitCode(code, nil)
	}
	return nil
}

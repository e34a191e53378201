package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/projector/host"
)

type commitOpts struct {
	scope
	message string
	json    bool
}

func newCommitCmd(a *app) *cobra.Command {
	var o commitOpts
	cmd := &cobra.Command{
		Use:   "commit",
		Short: "Publish the cache's local changes to the ledger",
		Long: `Commit scans the cache (size, mtime and mode, then SHA-256) against what the
ledger says it holds, uploads the content of changed files to the blob store, and
publishes one commit: one event per touched partition, all or nothing.

Nothing changed: nothing is published and the command exits 0.

If another host extended a touched partition first, commit reads that partition's
new commits; when none of them changed a path this host changed, it applies them
and retries. Otherwise it stops with exit code 3 naming the conflicting paths; the
local files are kept and stay uncommitted.`,
		Example: `  syncledger commit -m "run vpc"
  syncledger commit --model command/shell:vpc --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCommit(cmd.Context(), a, o) },
	}
	o.addFlags(cmd.Flags(), "commit")
	cmd.Flags().StringVarP(&o.message, "message", "m", "", "commit message")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

func runCommit(ctx context.Context, a *app, o commitOpts) error {
	parts, h, err := a.scopedHost(ctx, o.scope)
	if err != nil {
		return err
	}
	res, err := h.Commit(ctx, host.CommitOptions{Message: o.message, Partitions: parts})
	if err == nil {
		a.beat(ctx, "commit", res.HWM, res.HWM)
	}
	return a.report(o.json, res, err, func() {
		if err == nil {
			printCommit(a, res)
		}
	})
}

func printCommit(a *app, r host.CommitResult) {
	if r.Nothing {
		fmt.Fprintf(a.stdout, "nothing to commit (hwm %d)\n", r.HWM)
		return
	}
	printPaths(a, r.Paths)
	seqs := make([]string, len(r.Seqs))
	for i, s := range r.Seqs {
		seqs[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(a.stdout, "committed %s at seq %s: %d files written, %d deleted, %s, %d partitions; hwm %d\n",
		r.Commit, strings.Join(seqs, ","), r.Written, r.Deleted, humanBytes(r.Bytes), len(r.Partitions), r.HWM)
	if r.Pulled > 0 {
		fmt.Fprintf(a.stdout, "(pulled %d remote commits to touched partitions first)\n", r.Pulled)
	}
}

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

type commitOpts struct {
	scope
	message string
	json    bool
	hints   []string
}

func newCommitCmd(a *app) *cobra.Command {
	var o commitOpts
	cmd := &cobra.Command{
		Use:   "commit",
		Short: "Publish the cache's local changes to the ledger",
		Long: `Commit scans the cache (size, mtime and mode, then SHA-256) against what the
ledger says it holds, uploads the content of changed files to the blob store, and
publishes one commit: one event per touched partition, all or nothing. A commit
holds at most 1,000 partitions (one JetStream atomic batch): a change of more is
published as consecutive commits of at most 1,000 partitions each, in partition
order, the message suffixed "(part i of n)", each all or nothing on its own (one
line on stderr says so; --json lists every commit under "commits"). If commit stops
between two of them, the earlier ones stay published and the rest of the change
stays uncommitted: commit again.

Nothing changed: nothing is published and the command exits 0.

If another host extended a touched partition first, commit reads that partition's
new commits; when none of them changed a path this host changed, it applies them
and retries. Otherwise it stops with exit code 3 naming the conflicting paths; the
local files are kept and stay uncommitted.

While a watch runs on the cache, commit asks it which paths changed (its dirty
set, kept with inotify) and checks only those: its cost follows the change, not
the size of the cache. It scans the whole cache when no watch runs, or when the
watch cannot vouch that it saw every change (it started after the last full
scan, its event queue overflowed, a directory was moved in). --hint names paths
the caller changed; they are checked as well, and never stand in for a scan.`,
		Example: `  syncledger commit -m "run vpc"
  syncledger commit --model command/shell:vpc --json
  syncledger commit --hint data/command/shell/vpc/result/1/raw`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCommit(cmd.Context(), a, o) },
	}
	o.addFlags(cmd.Flags(), "commit")
	cmd.Flags().StringVarP(&o.message, "message", "m", "", "commit message")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	cmd.Flags().StringArrayVar(&o.hints, "hint", nil, "a path this command's caller changed (repeatable; relative to the cache, or absolute inside it): checked besides the watch's dirty set")
	return cmd
}

func runCommit(ctx context.Context, a *app, o commitOpts) error {
	parts, h, err := a.scopedHost(ctx, o.scope)
	if err != nil {
		return err
	}
	hints, err := hintPaths(h.Dir().Root(), o.hints)
	if err != nil {
		return err
	}
	round := dirty.Begin(ctx, h.Dir().Root(), hints, a.logger)
	opt := host.CommitOptions{Message: o.message, Partitions: parts, Changed: round.Changed}
	if !o.json {
		opt.MaxPaths = printedPaths // what printCommit shows
	}
	res, err := h.Commit(ctx, opt)
	if err == nil {
		round.Ack(ctx, len(parts) > 0)
		a.beat(ctx, "commit", res.HWM, res.HWM)
		a.noteSplit(res)
	}
	return a.report(o.json, res, err, func() {
		if err == nil {
			printCommit(a, res)
		}
	})
}

// hintPaths makes --hint paths relative to the cache root (slash-separated).
// A path outside the cache is a usage error.
func hintPaths(root string, hints []string) ([]string, error) {
	out := make([]string, 0, len(hints))
	for _, h := range hints {
		p := h
		if filepath.IsAbs(p) {
			rel, err := filepath.Rel(root, p)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return nil, usagef("--hint %s: not inside the cache %s", h, root)
			}
			p = rel
		}
		p = filepath.ToSlash(filepath.Clean(p))
		if p == ".." || strings.HasPrefix(p, "../") {
			return nil, usagef("--hint %s: not inside the cache %s", h, root)
		}
		out = append(out, p)
	}
	return out, nil
}

// noteSplit says on stderr, in one line, that a commit's changes were
// published as several commits (host.Commit splits a change of more than
// ledger.MaxBatch partitions or host.DefaultCommitHold files), each atomic on
// its own.
func (a *app) noteSplit(r host.CommitResult) {
	switch {
	case len(r.Commits) <= 1:
	case len(r.Partitions) > ledger.MaxBatch:
		fmt.Fprintf(a.stderr, "syncledger: note: the change touches %d partitions, more than the %d one atomic commit holds: published as %d commits, each all or nothing on its own\n",
			len(r.Partitions), ledger.MaxBatch, len(r.Commits))
	default:
		fmt.Fprintf(a.stderr, "syncledger: note: the change holds %d files, more than the %d one commit holds: published as %d commits of whole partitions, each all or nothing on its own\n",
			r.Written+r.Deleted, host.DefaultCommitHold, len(r.Commits))
	}
}

func printCommit(a *app, r host.CommitResult) {
	if r.Nothing {
		fmt.Fprintf(a.stdout, "nothing to commit (hwm %d)\n", r.HWM)
		return
	}
	printPathsOf(a, r.Paths, r.Written+r.Deleted)
	if len(r.Commits) > 1 {
		for i, c := range r.Commits {
			fmt.Fprintf(a.stdout, "committed %s (part %d of %d) at seq %s: %d files written, %d deleted, %d partitions\n",
				c.Commit, i+1, len(r.Commits), seqList(c.Seqs), c.Written, c.Deleted, c.Partitions)
		}
		fmt.Fprintf(a.stdout, "%d commits: %d files written, %d deleted, %s, %d partitions; hwm %d\n",
			len(r.Commits), r.Written, r.Deleted, humanBytes(r.Bytes), len(r.Partitions), r.HWM)
	} else {
		fmt.Fprintf(a.stdout, "committed %s at seq %s: %d files written, %d deleted, %s, %d partitions; hwm %d\n",
			r.Commit, seqList(r.Seqs), r.Written, r.Deleted, humanBytes(r.Bytes), len(r.Partitions), r.HWM)
	}
	if r.Pulled > 0 {
		fmt.Fprintf(a.stdout, "(pulled %d remote commits to touched partitions first)\n", r.Pulled)
	}
}

// seqList writes seqs as a list, each run of consecutive seqs as "first-last"
// (an atomic commit's seqs are one run): 5, 7-9.
func seqList(seqs []ledger.Seq) string {
	var out []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j > i+1 {
			out = append(out, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		} else {
			for k := i; k <= j; k++ {
				out = append(out, fmt.Sprint(seqs[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(out, ",")
}

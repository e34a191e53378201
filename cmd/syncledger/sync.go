package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

type syncOpts struct {
	scope
	lazy bool
	json bool
}

func newSyncCmd(a *app) *cobra.Command {
	var o syncOpts
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Bring this host's cache up to date with the ledger",
		Long: `Sync applies the ledger's new commits to the cache (--cache).

A full sync reads every commit after this host's high-water mark (HWM) and moves
the HWM to the last one. A scoped sync (--model, --partition) reads only those
partitions' commits and never moves the HWM: a later full sync still reads every
other partition's commits (the lesson of swamp-club#3193).

With nothing new, a sync costs one request to the server. Files changed locally
and not committed are never overwritten: the sync stops and names them (exit 3).`,
		Example: `  syncledger sync
  syncledger sync --model command/shell:vpc
  syncledger sync --partition audit --json
  syncledger sync --lazy          # data/**/raw as metadata only; see 'syncledger fetch'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSync(cmd.Context(), a, o) },
	}
	o.addFlags(cmd.Flags(), "sync")
	cmd.Flags().BoolVar(&o.lazy, "lazy", false, "lazy hydration: apply data/**/raw files as metadata only (fetch them with 'syncledger fetch')")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

func runSync(ctx context.Context, a *app, o syncOpts) error {
	a.oneShotSync = true
	parts, h, err := a.scopedHost(ctx, o.scope)
	if err != nil {
		return err
	}
	res, err := h.Sync(ctx, host.SyncOptions{Partitions: parts, Lazy: o.lazy})
	if err == nil && len(o.models) > 0 {
		err = a.checkModels(ctx, o.models, res.Head)
	}
	if err == nil {
		a.beat(ctx, "sync", res.HWM, res.Head)
	}
	return a.report(o.json, res, err, func() { printSync(a, res) })
}

// checkModels fails, naming it, for a --model no commit ever touched: a sync of
// a misspelt model would otherwise answer "up to date". head is the last seq
// the scoped sync saw over all the models' partitions: 0 means none has any.
func (a *app) checkModels(ctx context.Context, models []string, head ledger.Seq) error {
	lg, err := a.Log(ctx)
	if err != nil {
		return err
	}
	for _, m := range models {
		typ, id, err := parseModel(m)
		if err != nil {
			return err
		}
		keys := ledger.PartitionKeysForModel(typ, id)
		found := false
		for _, k := range keys {
			if head == 0 {
				break // no partition of any model has an event
			}
			last, err := lg.PartitionLastSeq(ctx, k)
			if err != nil {
				return fmt.Errorf("read last seq of partition %q: %w", k, err)
			}
			if found = last > 0; found {
				break
			}
		}
		if !found {
			return fmt.Errorf("--model %s: the ledger has no such model (no commit touched its partitions %s; 'syncledger log' lists what was committed): %w",
				m, strings.Join(keys, ", "), ledger.ErrNotFound)
		}
	}
	return nil
}

// printSync prints a sync's result for people: what it pulled, then where it stands.
func printSync(a *app, r host.SyncResult) {
	if r.Healed != nil {
		printHealed(a, r.Healed)
	}
	from := ""
	if r.Source != nil && !r.Source.FromOrigin() {
		// Read through a mirror (--read-nats): up to date with it, which
		// may lag the origin.
		from = "; head from " + r.Source.Describe(time.Now())
	}
	if r.UpToDate {
		fmt.Fprintf(a.stdout, "up to date (hwm %d%s)\n", r.HWM, from)
		return
	}
	defer func() {
		if from != "" {
			fmt.Fprintf(a.stdout, "(%s)\n", from[2:])
		}
	}()
	printPaths(a, r.Paths)
	scope := ""
	if r.Scoped {
		scope = " (scoped: hwm unchanged)"
	}
	fmt.Fprintf(a.stdout, "pulled %d files, deleted %d, %d lazy, %s from %d events; hwm %d, head %d%s\n",
		r.Written, r.Deleted, r.Lazy, humanBytes(r.Bytes), r.Events, r.HWM, r.Head, scope)
}

// printPaths lists paths, at most 20, for people.
func printPaths(a *app, paths []string) { printPathsOf(a, paths, len(paths)) }

// printedPaths is the most paths a command prints of a result.
const printedPaths = 20

// printPathsOf prints the first printedPaths of paths, some of total.
func printPathsOf(a *app, paths []string, total int) {
	for i, p := range paths {
		if i == printedPaths {
			break
		}
		fmt.Fprintf(a.stdout, "  %s\n", p)
	}
	if total > printedPaths {
		fmt.Fprintf(a.stdout, "  … and %d more\n", total-printedPaths)
	}
}

// humanBytes is n bytes in binary units (ledger.Bytes).
func humanBytes(n int64) string { return ledger.Bytes(uint64(max(n, 0))) }

// printHealed says what a heal did (host.Healed): the ledger had lost commits
// this cache applied.
func printHealed(a *app, hd *host.Healed) {
	w := a.stdout
	if hd.Fork != nil {
		fmt.Fprintf(w, "the ledger lost commits this cache applied: %v\n", hd.Fork)
	} else {
		fmt.Fprintln(w, "finished an interrupted heal of this cache (the ledger had lost commits it applied)")
	}
	fmt.Fprintf(w, "rebuilt from the ledger (it still holds this cache's history up to seq %d); nothing of this cache was deleted\n", hd.Common)
	switch {
	case hd.Published != nil && !hd.Published.Nothing:
		fmt.Fprintf(w, "republished %d files the ledger lost (commit %s):\n", len(hd.Republish), hd.Published.Commit)
		printPaths(a, hd.Republish)
	case len(hd.Republish) > 0:
		fmt.Fprintf(w, "put back %d files the ledger lost, uncommitted: 'syncledger commit' republishes them:\n", len(hd.Republish))
		printPaths(a, hd.Republish)
	}
	if hd.Same > 0 {
		fmt.Fprintf(w, "%d files the ledger lost are in it again (another host republished them)\n", hd.Same)
	}
	if len(hd.Local) > 0 {
		fmt.Fprintf(w, "put back %d uncommitted changes of this host, still uncommitted:\n", len(hd.Local))
		printPaths(a, hd.Local)
	}
	if len(hd.Deleted) > 0 {
		fmt.Fprintf(w, "deleted again %d files this host had deleted, uncommitted:\n", len(hd.Deleted))
		printPaths(a, hd.Deleted)
	}
	if len(hd.Kept) > 0 {
		fmt.Fprintf(w, "kept %d files under %s: the ledger has written other content at their paths since (copy back what should win, then 'syncledger commit'):\n", len(hd.Kept), hd.KeptIn)
		printPaths(a, hd.Kept)
	}
	if len(hd.Gone) > 0 {
		fmt.Fprintf(w, "%d files of lost commits were synced here as metadata only and their content is no longer in the blob store: a host that holds them republishes them when it syncs:\n", len(hd.Gone))
		printPaths(a, hd.Gone)
	}
}

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/maintain"
)

// minGrace is the shortest --grace that protects every commit in flight: a
// commit takes a stored blob as is for up to ledger.BlobRefreshAge, and needs
// it kept until it publishes.
const minGrace = 2 * ledger.BlobRefreshAge

func newGCCmd(a *app) *cobra.Command {
	var o struct {
		dryRun, json, verbose bool
		shortGrace            bool
		grace                 time.Duration
	}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Delete blobs no host, rebuild or replay can need any more",
		Long: `GC deletes the blobs that are referenced neither by a usable snapshot (one after
which the stream holds every event), nor by any event still in the stream
(directly, as a manifest, or by a manifest's entries), and that were stored more
than --grace ago (a commit in flight uploads before it publishes). Then it deletes
the snapshots no rebuild can use any more. It reports what it deleted, or with
--dry-run what it would delete.

Blobs become garbage once 'syncledger snapshot --retain-margin' has dropped the
events that referenced them: a host behind the newest snapshot still syncs
through every event in the stream and needs what they wrote.

A commit that reuses content whose blob is garbage (a file set back to an old
version) stores the blob again when it is older than 1 h, and GC looks at each
blob once more before deleting it. That protects every commit only while --grace
exceeds 1 h plus the longest commit, so a --grace under 2 h is refused unless
--allow-short-grace says no host commits meanwhile.`,
		Example: `  syncledger gc --dry-run
  syncledger gc --grace 48h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.grace < 0 {
				return usagef("--grace %v: must not be negative", o.grace)
			}
			if o.grace < minGrace && !o.shortGrace && !o.dryRun {
				return usagef("--grace %v is under %v: a commit in flight may rely on a blob stored up to %v ago, which GC could delete; pass --allow-short-grace if no host commits while GC runs",
					o.grace, minGrace, ledger.BlobRefreshAge)
			}
			cfg, err := a.snapshotConfig(ctx)
			if err != nil {
				return err
			}
			res, err := maintain.GC(ctx, cfg, maintain.GCOptions{Grace: o.grace, DryRun: o.dryRun})
			if err != nil {
				return err
			}
			if o.json {
				return a.printJSON(res)
			}
			verb := "deleted"
			if res.DryRun {
				verb = "would delete"
			}
			if o.verbose || res.DryRun {
				for _, d := range res.Deleted {
					fmt.Fprintf(a.stdout, "  blob %s\n", d)
				}
			}
			for _, k := range res.DeletedSnapshots {
				fmt.Fprintf(a.stdout, "  snapshot %s\n", k)
			}
			fmt.Fprintf(a.stdout, "%s %d of %d blobs (%s) and %d snapshots; kept %d referenced (by %d snapshots and events %d..%d), %d younger than %v\n",
				verb, len(res.Deleted), res.Blobs, humanBytes(res.Bytes), len(res.DeletedSnapshots),
				res.Referenced, res.Snapshots, res.Floor, res.Head, res.Young, o.grace)
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "report what would be deleted; delete nothing")
	cmd.Flags().DurationVar(&o.grace, "grace", 24*time.Hour, "keep blobs stored less than this long ago")
	cmd.Flags().BoolVar(&o.shortGrace, "allow-short-grace", false, "allow a --grace under 2h (safe only if no host commits while GC runs)")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "list every deleted blob")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

func newWatchCmd(a *app) *cobra.Command {
	var lazy, asJSON bool
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Keep the cache current as commits arrive, until interrupted",
		Long: `Watch syncs the cache, then follows the ledger and applies each commit as soon
as all of its parts have arrived. SIGINT or SIGTERM stops it cleanly: every applied
commit is persisted; a commit read only in part is read again next time.

Watch holds the cache while it runs: run commit and exec against it from this
process's host only after stopping it, or use another cache.

On Linux, watch also keeps the cache's dirty set: it watches the cache with
inotify and tells each commit which paths changed, so that a commit checks those
paths instead of scanning the whole cache (see syncledger commit --help).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			h, err := a.Host(ctx)
			if err != nil {
				return err
			}
			defer dirty.Start(ctx, h.Dir().Root(), a.logger)()
			rep := a.beatReporter(ctx, "watch", h)
			a.logger.Info("watching", "ledger", a.ledgerName, "cache", h.Dir().Root())
			return h.Watch(ctx, host.SyncOptions{Lazy: lazy}, func(r host.SyncResult) {
				rep.Update(r.HWM, r.Head)
				if asJSON {
					_ = a.printJSON(r)
					return
				}
				if r.Healed != nil {
					printHealed(a, r.Healed)
				}
				printPaths(a, r.Paths)
				fmt.Fprintf(a.stdout, "applied seq %d: %d written, %d deleted; hwm %d\n", r.Head, r.Written, r.Deleted, r.HWM)
			})
		},
	}
	cmd.Flags().BoolVar(&lazy, "lazy", false, "lazy hydration: apply data/**/raw files as metadata only")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each applied commit as JSON")
	return cmd
}

func newVerifyCmd(a *app) *cobra.Command {
	var asJSON, repair bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every cached file against its SHA-256 (exit 1 if any is missing or altered)",
		Long: `Verify hashes every cached file the ledger holds and compares it with the
content the cache last synced or committed: a file is missing, or altered.

An altered file whose size, mtime and mode are unchanged is not an edit (an edit
moves the mtime) but corruption, which commit cannot see and sync, fetch and
rebuild leave alone: --repair restores each such file from the blob store and
lists it as restored. Missing files and edits are left as they are: commit them,
or take the ledger's version. Exit 1 while any file is missing or altered.`,
		Example: `  syncledger verify
  syncledger verify --repair`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			h, err := a.ExistingHost(ctx)
			if err != nil {
				return err
			}
			verify := h.Verify
			if repair {
				verify = h.Repair
			}
			res, err := verify(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				for _, p := range res.Missing {
					fmt.Fprintf(a.stdout, "missing  %s\n", p)
				}
				for _, p := range res.Altered {
					fmt.Fprintf(a.stdout, "altered  %s\n", p)
				}
				for _, p := range res.Restored {
					fmt.Fprintf(a.stdout, "restored %s\n", p)
				}
				fmt.Fprintf(a.stdout, "checked %d files (%d lazy not checked): %d missing, %d altered, %d restored\n",
					res.Checked, res.Lazy, len(res.Missing), len(res.Altered), len(res.Restored))
				if len(res.Altered) > 0 && !repair {
					fmt.Fprintln(a.stdout, "an altered file whose size, mtime and mode are unchanged is corruption: 'syncledger verify --repair' restores it")
				}
			}
			if !res.OK() {
				return withExitCode(exitError, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&repair, "repair", false, "restore from the blob store every altered file that is not a local edit (size, mtime and mode unchanged)")
	return cmd
}

func newFetchCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fetch PATH…",
		Short: "Fetch the content of lazily synced files",
		Long: `Fetch downloads the content of files a lazy sync applied as metadata only
(paths relative to the cache, as in the ledger). Files already present are left alone.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			h, err := a.Host(ctx)
			if err != nil {
				return err
			}
			res, err := h.Fetch(ctx, args)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(res)
			}
			printPaths(a, res.Paths)
			fmt.Fprintf(a.stdout, "fetched %d files, %s\n", res.Written, humanBytes(res.Bytes))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/projector/host"
)

func newResolveCmd(a *app) *cobra.Command {
	var (
		theirs, mine, all, asJSON bool
		message                   string
	)
	cmd := &cobra.Command{
		Use:   "resolve (--theirs | --mine) (PATH… | --all)",
		Short: "Settle a conflict between this host's uncommitted changes and the ledger",
		Long: `A conflict is a file this host changed and did not commit, which another host
changed in the ledger meanwhile: commit stops (exit 3, "local files kept") and so
does sync ("local changes would be overwritten"). 'syncledger status' lists them.
Resolve picks a side for each PATH (relative to the cache, as in the ledger):

  --theirs  take the ledger's version. This host's copy is moved, not deleted,
            to .syncledger/conflicts/<time>/PATH (printed).
  --mine    commit this host's version on top of the ledger's. The ledger's
            version stays in the ledger's history.

--all resolves every conflict 'status' lists. All conflicting paths of one
partition must be resolved in one command. Exit 3 if the ledger moved again
meanwhile (run resolve again).`,
		Example: `  syncledger resolve --theirs data/aws/ec2/vpc/1/raw
  syncledger resolve --mine --all -m "keep the local run"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case theirs == mine:
				return usagef("resolve needs exactly one of --theirs and --mine")
			case all == (len(args) > 0):
				return usagef("resolve needs PATH… or --all, not both")
			}
			ctx := cmd.Context()
			h, err := a.Host(ctx)
			if err != nil {
				return err
			}
			res, err := h.Resolve(ctx, host.ResolveOptions{Paths: args, All: all, Mine: mine, Message: message})
			return a.report(asJSON, res, err, func() {
				if err == nil {
					printResolve(a, res, mine)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&theirs, "theirs", false, "take the ledger's version; keep this host's copy under .syncledger/conflicts/")
	cmd.Flags().BoolVar(&mine, "mine", false, "commit this host's version on top of the ledger's")
	cmd.Flags().BoolVar(&all, "all", false, "resolve every conflict 'status' lists")
	cmd.Flags().StringVarP(&message, "message", "m", "", "commit message (--mine)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func printResolve(a *app, r host.ResolveResult, mine bool) {
	if len(r.Paths) == 0 {
		fmt.Fprintln(a.stdout, "no conflicts")
		return
	}
	printPaths(a, r.Paths)
	switch {
	case mine && r.Commit != nil && !r.Commit.Nothing:
		fmt.Fprintf(a.stdout, "kept this host's version of %d files: committed %s on top of the ledger's; hwm %d\n", len(r.Paths), r.Commit.Commit, r.Commit.HWM)
	case mine:
		fmt.Fprintf(a.stdout, "this host's version of %d files equals the ledger's: nothing to commit\n", len(r.Paths))
	case r.Kept != "":
		fmt.Fprintf(a.stdout, "took the ledger's version of %d files; this host's copies are under %s\n", len(r.Paths), r.Kept)
	default:
		fmt.Fprintf(a.stdout, "took the ledger's version of %d files\n", len(r.Paths))
	}
}

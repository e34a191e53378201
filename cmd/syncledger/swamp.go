package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newSwampCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "swamp",
		Short: "Run swamp on the ledger (setup), or interoperate with swamp's S3/GCS datastores",
		Long: `Tools for swamp hosts (docs/swamp.md):

  setup    make a swamp repo's datastore this ledger: import its current
           datastore's data, write the @syncledger/datastore extension and
           configure .swamp.yaml (the same on every host)
  import   read a swamp datastore (v2 shards, v1 monolith, or a plain listing)
           and publish the ledger's first commits, one per partition, or
           merge it into partitions hosts already write
  doctor   check a swamp host's cache against its remote index, detect the
           swamp-club#3193 state, and optionally repair the sync-state sidecar

To keep a swamp datastore up to date from the ledger, run the mirror:
"syncledger consume swamp-mirror --to URL".

Exit codes: 0 done; 5 the command ran but found the job not done (files left
out of an import, an unhealthy cache not repaired); otherwise as usual.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSwampImportCmd(a), newSwampDoctorCmd(a), newSwampSetupCmd(a), newSwampAgentCmd(a))
	return cmd
}

// listSome prints up to max items of a list, indented, and how many more.
func listSome(a *app, items []string, max int) {
	for i, it := range items {
		if i == max {
			fmt.Fprintf(a.stdout, "    … and %d more (--json lists all)\n", len(items)-max)
			return
		}
		fmt.Fprintf(a.stdout, "    %s\n", it)
	}
}

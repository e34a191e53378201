package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

func newReplayCmd(a *app) *cobra.Command {
	var o struct {
		scope
		to          uint64
		into        string
		quiet, json bool
	}
	cmd := &cobra.Command{
		Use:   "replay --to SEQ --into DIR",
		Short: "Materialise the datastore as it was at a commit seq (time travel)",
		Long: `Replay writes into DIR (new or empty) the datastore's files as they were right
after the last commit at or below seq SEQ: from the best snapshot at or below it
plus the commits after it. --model and --partition limit it to some models. DIR
holds only the files (no cache state); it is for audits and debugging.

Replay needs the events between that snapshot and SEQ: once retention dropped
them, only a snapshot's own seq can be replayed.`,
		Example: `  syncledger replay --to 1234 --into /tmp/at-1234
  syncledger replay --to 1234 --into /tmp/vpc --model command/shell:vpc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.to == 0 || o.into == "" {
				return usagef("replay needs --to SEQ (≥ 1) and --into DIR")
			}
			parts, err := o.keys()
			if err != nil {
				return err
			}
			lg, err := a.Log(ctx)
			if err != nil {
				return err
			}
			bl, err := a.Blobs(ctx)
			if err != nil {
				return err
			}
			pr := a.newProgress("replay", o.quiet)
			res, err := host.Replay(ctx, host.ReplayConfig{Log: lg, Blobs: bl, Into: o.into,
				To: ledger.Seq(o.to), Partitions: parts, Logger: a.logger, Progress: pr.update})
			pr.done()
			if err != nil {
				return err
			}
			if o.json {
				return a.printJSON(res)
			}
			from := "the ledger's events alone"
			if res.Snapshot > 0 {
				from = fmt.Sprintf("snapshot at seq %d", res.Snapshot)
			}
			fmt.Fprintf(a.stdout, "%s at seq %d: %d files (%s) in %d partitions, from %s plus %d events\n",
				o.into, res.Seq, res.Files, humanBytes(res.Bytes), res.Partitions, from, res.Events)
			return nil
		},
	}
	o.addFlags(cmd.Flags(), "replay")
	cmd.Flags().Uint64Var(&o.to, "to", 0, "the commit seq to materialise")
	cmd.Flags().StringVar(&o.into, "into", "", "the directory to write the files into (new or empty)")
	cmd.Flags().BoolVar(&o.quiet, "quiet", false, "no progress output")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

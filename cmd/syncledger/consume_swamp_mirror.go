package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp"
)

// newConsumeSwampMirrorCmd is "consume swamp-mirror": the swamp mirror
// (swamp.Mirror), a subcommand of "consume".
func newConsumeSwampMirrorCmd(a *app) *cobra.Command {
	var (
		to, ns      string
		once        bool
		poll, grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "swamp-mirror",
		Short: "Keep a swamp v2 datastore layout up to date from the ledger",
		Long: `swamp-mirror writes the ledger's files to --to in swamp's v2 remote layout, so
swamp hosts that have not moved to syncledger keep working from it (docs/swamp.md):

  <rel path>                    every file, byte for byte
  _index/<partition>.json       the shards: {"version":1,"entries":{rel: {key,
                                size, lastModified, sha256}}}
  _index/_meta.json             {"version":2,"partitions":[…],"commitSeq":N}

Every ledger commit becomes one swamp commit, written in the order data,
shards, meta, so a reader never sees a meta listing a shard (or a shard naming
an object) not yet written; commitSeq grows by one per commit. Objects the
index no longer reaches are deleted after --delete-grace. The position is kept
in the target (_control/syncledger-mirror.json): a restart resumes there.

The mirror must be the only writer of the layout: swamp hosts may pull from it
but must not push to it, and only one mirror may run per target. It refuses a
target that already holds a swamp index it did not write, or that mirrors
another ledger. --namespace NS writes the namespaced layout (NS/…).

Unlike the other consumers it keeps no JetStream consumer: its position lives
with its output. --once mirrors up to the ledger's head and exits.`,
		Example: `  syncledger consume swamp-mirror --to 's3://swamp-bucket/datastore?region=eu-west-1'
  syncledger consume swamp-mirror --to gs://swamp-bucket/prefix --namespace team-a --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if to == "" {
				return usagef("--to is required: the swamp datastore to write")
			}
			target, err := a.openBucket(ctx, to, ledger.RetryPolicy{})
			if err != nil {
				return err
			}
			l, err := a.Log(ctx)
			if err != nil {
				return err
			}
			blobs, err := a.Blobs(ctx)
			if err != nil {
				return err
			}
			m, err := swamp.NewMirror(swamp.MirrorConfig{
				Log: l, Blobs: blobs, Target: target, Namespace: ns,
				DeleteGrace: grace, PollInterval: poll, Logger: a.logger,
			})
			if err != nil {
				return &usageError{err}
			}
			a.logger.Info("swamp mirror", "ledger", a.ledgerName, "to", redactURL(to), "namespace", ns)
			if !once {
				if err := m.Run(ctx); err != nil && !errors.Is(err, ctx.Err()) {
					return err
				}
				return nil
			}
			total := 0
			for {
				res, err := m.Step(ctx)
				if err != nil {
					return err
				}
				total += res.Commits
				if res.Commits == 0 {
					_, err := fmt.Fprintf(a.stdout, "mirrored %d commits; at seq %d, swamp commitSeq %d\n", total, res.Seq, res.CommitSeq)
					return err
				}
			}
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&to, "to", "", "the swamp datastore to write: s3://BUCKET/PREFIX?…, gs://BUCKET/PREFIX or file:///DIR (required)")
	fs.StringVar(&ns, "namespace", "", "write swamp's namespaced layout under NS/")
	fs.BoolVar(&once, "once", false, "mirror up to the ledger's head, then exit")
	fs.DurationVar(&poll, "poll", swamp.DefaultPollInterval, "how often to look for new commits when idle")
	fs.DurationVar(&grace, "delete-grace", swamp.DefaultDeleteGrace, "how long an object the index no longer reaches stays before it is deleted")
	return cmd
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/ledger"
)

func newTailCmd(a *app) *cobra.Command {
	var (
		sc     scope
		asJSON bool
		from   uint64
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow the ledger's commits live",
		Long: `Tail prints each new commit as soon as all of its parts are in the ledger, until
interrupted. It keeps no position (use "syncledger consume" for that): it starts
after the ledger's last commit, or at --from.

Human output is one line per commit: seq, time, host, commit id, partitions,
files written and deleted, bytes, message. With --json, one JSON object per
commit, in the audit line's format. --model TYPE:ID and --partition KEY
(repeatable) show only commits touching those partitions, and only their parts.`,
		Example: `  syncledger tail
  syncledger tail --json --model command/shell:vpc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := sc.keys()
			if err != nil {
				return err
			}
			return runTail(cmd.Context(), a, keys, ledger.Seq(from), asJSON)
		},
	}
	fs := cmd.Flags()
	sc.addFlags(fs, "show")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per commit")
	fs.Uint64Var(&from, "from", 0, "start at this seq (default: after the last commit)")
	return cmd
}

func runTail(ctx context.Context, a *app, keys []string, from ledger.Seq, asJSON bool) error {
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	if from == 0 {
		last, err := l.LastSeq(ctx)
		if err != nil {
			return fmt.Errorf("tail: %w", err)
		}
		from = last + 1
	}
	var filter map[string]bool
	if keys != nil {
		filter = make(map[string]bool, len(keys))
		for _, k := range keys {
			filter[k] = true
		}
	}
	var (
		g         = ledger.Commits{Filtered: true}
		blobs     *ledger.Bucket
		blobsOpen bool
	)
	show := func(c consumers.Commit) error {
		if filter != nil {
			var recs []ledger.Record
			for _, r := range c.Records {
				if filter[r.Event.Partition] {
					recs = append(recs, r)
				}
			}
			if recs == nil {
				return nil
			}
			c.Records = recs
		}
		needBlobs := false
		for _, r := range c.Records {
			needBlobs = needBlobs || !r.Event.Manifest.IsZero()
		}
		if needBlobs && !blobsOpen {
			blobsOpen = true
			blobs = consumeBlobs(ctx, a)
		}
		s, err := consumers.Summarize(ctx, a.ledgerName, c, blobs)
		if err != nil {
			a.logger.Warn("cannot read a manifest", "commit", c.ID, "err", err)
			if s, err = consumers.Summarize(ctx, a.ledgerName, c, nil); err != nil {
				return err
			}
		}
		if asJSON {
			return a.printJSON(s)
		}
		return printTailLine(a, s)
	}
	err = l.Follow(ctx, from, func(r ledger.Record) error {
		cs, err := consumers.Group(&g, r)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := show(c); err != nil {
				return err
			}
		}
		return nil
	})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // interrupted: the normal end
	}
	if err != nil {
		return fmt.Errorf("tail ledger %q: %w", a.ledgerName, err)
	}
	return nil
}

func printTailLine(a *app, s consumers.Summary) error {
	parts := strings.Join(s.Partitions, ",")
	if len(s.Partitions) < s.Parts {
		parts += fmt.Sprintf(" (%d of %d)", len(s.Partitions), s.Parts)
	}
	files := fmt.Sprintf("+%d -%d files", s.Files, s.Deleted)
	if len(s.Unresolved) > 0 {
		files += " (and a manifest)"
	}
	line := fmt.Sprintf("%6d  %s  %s  %s  %s  %s  %d B", s.Seq, s.At.UTC().Format(time.RFC3339), oneLine(s.Host), s.Commit, parts, files, s.Bytes)
	if s.Message != "" {
		line += "  " + oneLine(s.Message)
	}
	_, err := fmt.Fprintln(a.stdout, line)
	return err
}

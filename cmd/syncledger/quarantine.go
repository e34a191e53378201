package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
)

// quarantineRow is one notice as `quarantine --list --json` prints it.
type quarantineRow struct {
	Seq    ledger.Seq `json:"seq"` // the quarantined message
	Reason string     `json:"reason"`
	By     string     `json:"by"`
	At     time.Time  `json:"at"`
}

func newQuarantineCmd(a *app) *cobra.Command {
	var (
		reason string
		list   bool
		force  bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "quarantine SEQ --reason TEXT | --list",
		Short: "Have every reader skip a bad message of the ledger (admin)",
		Long: `A message of the ledger that is not a valid event (it does not decode, names
another partition or ledger, lies about its chain or its parts, or its content is
missing from the blob store) stops every sync, snapshot and rebuild at its seq:
syncledger refuses it rather than guess. The stream denies deletes, so the way out
is a quarantine: a notice, stored in the ledger itself, that the message at SEQ is
not an event. Every reader — hosts, fresh hosts, snapshots, rebuilds, replays,
consumers — then skips exactly that seq, the same way, and goes on.

The error of a stuck host names the command. A message that decodes as a
well-formed event is refused without --force: quarantine one only when a host's
error names it (its chain or parts lie, its content is missing), and only a seq
hosts stop at (their hwm is below it): a host that applied the message keeps what
it applied until it rebuilds. Only the admin role may publish a notice. 'log' shows notices
and quarantined seqs; --list lists them.`,
		Example: `  syncledger quarantine 1234 --reason "truncated message published by a broken tool"
  syncledger quarantine --list`,
		Args: func(cmd *cobra.Command, args []string) error {
			if list {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if list {
				return runQuarantineList(ctx, a, asJSON)
			}
			n, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || n == 0 {
				return usagef("SEQ %q: want a seq of the ledger (a positive number)", args[0])
			}
			if reason == "" {
				return usagef("--reason: say why seq %d is quarantined (it is kept in the ledger)", n)
			}
			l, err := a.Log(ctx)
			if err != nil {
				return err
			}
			q := ledger.Quarantine{Seq: ledger.Seq(n), Reason: reason, By: a.host, At: time.Now()}
			at, err := l.Quarantine(ctx, q, force)
			if err != nil {
				return err
			}
			row := quarantineRow{Seq: q.Seq, Reason: q.Reason, By: q.By, At: q.At.UTC()}
			if asJSON {
				return a.printJSON(struct {
					quarantineRow
					Notice ledger.Seq `json:"notice"`
				}{row, at})
			}
			fmt.Fprintf(a.stdout, "quarantined seq %d (notice at seq %d): every reader skips it from now on; hosts stuck at it go on with their next sync\n", q.Seq, at)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the message is quarantined (required; kept in the ledger)")
	cmd.Flags().BoolVar(&list, "list", false, "list the quarantined seqs")
	cmd.Flags().BoolVar(&force, "force", false, "quarantine a well-formed event too (its chain or parts lie, its content is missing: the stuck host's error says so)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func runQuarantineList(ctx context.Context, a *app, asJSON bool) error {
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	qs, err := l.Quarantines(ctx)
	if err != nil {
		return err
	}
	rows := []quarantineRow{}
	for _, s := range slices.Sorted(maps.Keys(qs)) {
		q := qs[s]
		rows = append(rows, quarantineRow{Seq: s, Reason: q.Reason, By: q.By, At: q.At.UTC()})
	}
	if asJSON {
		return a.printJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "no quarantined seqs")
	}
	for _, r := range rows {
		fmt.Fprintf(a.stdout, "%6d  %s  %s  %s\n", r.Seq, r.At.Format(time.RFC3339), oneLine(r.By), oneLine(r.Reason))
	}
	return nil
}

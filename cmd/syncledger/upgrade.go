package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger/natsjs"
)

func newUpgradeCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Make the ledger's streams, buckets and dead letters as this release makes them (the admin role)",
		Long: `Upgrade makes every resource of the ledger --ledger on the server as this
release of syncledger makes it, as an admin: the ledger's stream, its heartbeat
and swamp buckets, its consumers' dead-letter stream and its blob store's NATS
object store bucket (when the blobs live in one). What is missing is created;
a setting that differs is changed — roll-ups, message TTLs and batches refused
where none is needed, keys kept until deleted, the subjects exactly the
ledger's —; a bucket with a setting no update can change (a message TTL once
allowed, memory storage) is made anew with its keys copied. It prints what it
did to each resource; run again, it changes nothing.

Run it once after upgrading syncledger, before the hosts (a host of this
release refuses a resource not made so, and names this command); hosts of the
previous release keep working on an upgraded ledger. Then render the servers'
permissions again ("config permissions"; serve does both when it starts): the
roles below admin no longer create or change any stream, bucket or consumer.
A swamp namespace is a ledger of its own (--ledger BASE_NS).`,
		Example: `  syncledger --ledger prod upgrade`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			changes, err := upgradeLedger(cmd.Context(), a, a.ledgerName)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(map[string]any{"ledger": a.ledgerName, "changes": changes})
			}
			printChanges(a, changes)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ledger, changes: [{resource, action, settings}]}")
	return cmd
}

// upgradeLedger makes every resource of ledger name as this build makes it
// (natsjs Ledger.Upgrade and the blob store's bucket), and reports what it
// did. It needs the admin role.
func upgradeLedger(ctx context.Context, a *app, name string) ([]natsjs.Change, error) {
	lg, err := a.ledgerOn(ctx, name)
	if err != nil {
		return nil, err
	}
	changes, err := lg.Upgrade(ctx)
	if err != nil {
		return nil, err
	}
	l, err := lg.Log(ctx)
	if err != nil {
		return changes, err
	}
	info, err := l.Info(ctx)
	if err != nil {
		return changes, err
	}
	ch, err := a.hardenBlobs(ctx, info.Blobs, info.Replicas)
	if err != nil {
		return changes, err
	}
	if ch.Resource != "" {
		changes = append(changes, ch)
	}
	return changes, nil
}

// printChanges prints what an upgrade did, one resource a line.
func printChanges(a *app, changes []natsjs.Change) {
	for _, ch := range changes {
		what := ch.Action
		if what == "" {
			what = "as this release makes it"
		}
		line := fmt.Sprintf("%s: %s", ch.Resource, what)
		if len(ch.Settings) > 0 {
			line += " (" + strings.Join(ch.Settings, "; ") + ")"
		}
		fmt.Fprintln(a.stdout, line)
	}
}

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

func newMirrorCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "A read replica of the ledger near hosts in another region (create, status, promote)",
		Long: `A mirror is a copy of the ledger's stream on a server near the hosts of
another region, in a JetStream domain of its own joined to the origin's by a
leaf node (docs/ops.md, Regions; deploy/regions). Hosts there read from it
(--read-nats, SYNCLEDGER_READ_NATS) and write to the origin (--nats): their
commits are checked against the origin, and what the mirror still lacks is
read from the origin, never taken as deleted.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newMirrorCreateCmd(a), newMirrorStatusCmd(a), newMirrorPromoteCmd(a))
	return cmd
}

func newMirrorCreateCmd(a *app) *cobra.Command {
	var asJSON, replace bool
	var replicas int
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make the ledger's mirror on the --read-nats server (the admin role, on both servers)",
		Long: `Create makes, on the server --read-nats names, the mirror of the ledger
--ledger whose origin is the --nats server's, or checks the one there. The two
must be in different JetStream domains (jetstream { domain: NAME }): a mirror in
the origin's own domain would answer direct gets addressed to the origin once
it lags. The origin must republish what it stores (syncledger upgrade). Run
again, it changes nothing. The origin's stream records the mirror (its domain,
this --read-nats URL without credentials, its replicas): 'syncledger restore'
makes every recorded mirror anew.

--replace deletes the mirror there and makes it anew: a mirror never copies
again a seq it holds, so after the origin was brought back from an older copy
otherwise than by 'syncledger restore' (a data directory put back), its mirror
would go on serving the commits that copy lost (docs/ops.md, Backups).`,
		Example: `  syncledger --nats nats://origin:4222 --read-nats nats://eu-leaf:4222 --ledger prod mirror create`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.readNATS == "" {
				return usagef("mirror create: no --read-nats: give the server (in the mirror's region) to make the mirror on")
			}
			c, err := a.NATS(cmd.Context())
			if err != nil {
				return err
			}
			res, err := c.CreateMirrorWith(cmd.Context(), a.ledgerName, natsjs.MirrorOptions{Replicas: replicas, Replace: replace})
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(struct {
					Ledger string `json:"ledger"`
					natsjs.MirrorResult
				}{a.ledgerName, res})
			}
			what := "is there, as syncledger makes it"
			switch {
			case res.Replaced:
				what = "deleted and made anew (it copies the origin from seq 1)"
			case res.Created:
				what = "created"
			}
			fmt.Fprintf(a.stdout, "mirror %s in domain %s of ledger %s (origin domain %s): %s\n", res.Stream, res.Domain, a.ledgerName, res.OriginDomain, what)
			return nil
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 1, "replicas of the mirror's stream in its domain")
	cmd.Flags().BoolVar(&replace, "replace", false, "delete the mirror there and make it anew (after the origin was brought back from an older copy)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ledger, created, replaced, stream, domain, originDomain}")
	return cmd
}

func newMirrorStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "How far the --read-nats mirror is behind the origin",
		Long: `Status prints the mirror's head (its last seq, its last contact with the
origin, the messages it knows it lacks) and the origin's own head (a stream
info its leader answers), and how many seqs the mirror is behind, and whether
the mirror is stale: made before the origin's last restore, holding commits the
restore rewound (make it anew: mirror create --replace). With the origin out of
reach it says so and exits 0: the mirror's head is all there is.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if a.readNATS == "" {
				return usagef("mirror status: no --read-nats: give the server holding the mirror")
			}
			l, err := a.Log(ctx)
			if err != nil {
				return err
			}
			mh, ok, err := l.MirrorHead(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("the --read-nats server serves the origin's stream itself, not a mirror: nothing lags: %w", ledger.ErrInvalid)
			}
			out := struct {
				Ledger      string       `json:"ledger"`
				Mirror      ledger.Head  `json:"mirror"`
				Origin      *ledger.Head `json:"origin,omitempty"`
				Behind      uint64       `json:"behind"`
				OriginError string       `json:"originError,omitempty"`
				Stale       string       `json:"stale,omitempty"` // made before the origin's last restore: make it anew
			}{Ledger: a.ledgerName, Mirror: mh}
			oh, err := l.Head(ctx, ledger.HeadRequest{Origin: true})
			if err != nil {
				out.OriginError = err.Error()
			} else {
				out.Origin = &oh
				if oh.Seq > mh.Seq {
					out.Behind = uint64(oh.Seq - mh.Seq)
				}
			}
			if out.Origin != nil {
				if err := l.MirrorStale(ctx); err != nil {
					out.Stale = err.Error()
				}
			}
			if asJSON {
				return a.printJSON(out)
			}
			fmt.Fprintf(a.stdout, "mirror\t%s\n", mh.Describe(time.Now()))
			if out.Stale != "" {
				fmt.Fprintf(a.stdout, "stale\t%s\n", out.Stale)
			}
			if out.Origin == nil {
				fmt.Fprintf(a.stdout, "origin\tunreachable: %s (reads go on from the mirror; commits are refused until it answers)\n", out.OriginError)
				return nil
			}
			fmt.Fprintf(a.stdout, "origin\t%s\nbehind\t%d\n", oh, out.Behind)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ledger, mirror, origin, behind, originError, stale}")
	return cmd
}

func newMirrorPromoteCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "promote",
		Short: "Make the mirror on the --nats server the ledger's origin, when the origin's region is lost (admin)",
		Long: `Promote makes the mirror of the ledger on the server --nats names (the
mirror's own, in its region) the ledger's stream, in place: it stops copying the
lost origin, takes commits, and is then made as this release makes a ledger
('syncledger upgrade': its republish, swamp's bucket, the heartbeats, the dead
letters). It is the failover of docs/ops.md, "Losing the origin's region".

First stop every writer that still reaches the old origin, and keep the old
origin from coming back linked to this region: its stream and the promoted one
would both take the ledger's subjects. Commits the old origin stored after the
mirror's last seq ('mirror status') are not in the mirror: a host that applied
them finds the ledger rewound and its next sync republishes them. Then point
every host's --nats at this server (and drop --read-nats). A mirror of the old
origin elsewhere is stale against the promoted one: make it anew from it
('mirror create --replace').`,
		Example: `  syncledger --nats nats://eu-leaf:4222 --ledger prod mirror promote`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if a.readNATS != "" {
				return usagef("mirror promote: --read-nats is for a host; give the mirror's server as --nats (it becomes the origin)")
			}
			c, err := a.NATS(ctx)
			if err != nil {
				return err
			}
			mark := fmt.Sprintf("%s (a mirror promoted)", time.Now().UTC().Format(time.RFC3339Nano))
			if err := c.PromoteMirror(ctx, a.ledgerName, mark); err != nil {
				return err
			}
			a.resetLedger()
			changes, err := upgradeLedger(ctx, a, a.ledgerName)
			if err != nil {
				return fmt.Errorf("the mirror of ledger %q is promoted, but making it as this release makes a ledger failed (run syncledger upgrade): %w", a.ledgerName, err)
			}
			l, err := a.Log(ctx)
			if err != nil {
				return err
			}
			head, err := l.LastSeq(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(struct {
					Ledger  string          `json:"ledger"`
					Head    ledger.Seq      `json:"head"`
					Changes []natsjs.Change `json:"changes"`
				}{a.ledgerName, head, changes})
			}
			fmt.Fprintf(a.stdout, "ledger %s: the mirror is its stream now, at seq %d; point every host's --nats here\n", a.ledgerName, head)
			printChanges(a, changes)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ledger, head, changes}")
	return cmd
}

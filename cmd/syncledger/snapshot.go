package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/maintain"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/snapshot"
)

type snapshotOpts struct {
	full, list, follow, quiet, json bool
	adopt                           bool
	margin                          uint64
	every                           uint64
	interval, poll                  time.Duration
}

func newSnapshotCmd(a *app) *cobra.Command {
	var o snapshotOpts
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Write a snapshot of the ledger's index; optionally drop the events it covers",
		Long: `Snapshot writes the ledger's full index (every file, every partition's mark, at
the last commit) to the blob store under snapshots/<ledger uuid>/, compressed,
with a checksum. It starts from the newest usable snapshot and replays the
commits after it in memory; it needs no cache. A snapshot is visible only once
complete, and the newest one listed is the one rebuilds use.

--retain-margin N then drops the stream's events older than the newest intact
snapshot's seq minus N (never newer ones; each partition's last event is kept).
Choose N at least the distance between two snapshots, so that the previous
snapshot stays usable if the newest one goes bad.

--follow keeps running and takes a snapshot whenever --every seqs were appended
or --interval passed since the newest one (what a serve or watch process can
run beside itself), until interrupted.

Only the admin role may take snapshots: each is attested in the ledger's stream
(the SHA-256 of its stored bytes), and hosts, rebuilds, replays and gc use a
snapshot only if its bytes hash to what the stream attests. Whoever may write
blobs may write under snapshots/ too; such a snapshot is listed as not
attested and never used. --adopt, once after upgrading from a release that did
not attest, attests the snapshots already stored that read back, and the
retention bound recorded beside them (check --list first).`,
		Example: `  syncledger snapshot
  syncledger snapshot --retain-margin 100000
  syncledger snapshot --follow --every 10000 --interval 1h --retain-margin 20000
  syncledger snapshot --list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSnapshot(cmd, a, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.full, "full", false, "replay the whole stream instead of starting from the newest snapshot")
	f.Uint64Var(&o.margin, "retain-margin", 0, "after the snapshot, drop events older than its seq minus this many seqs")
	f.BoolVar(&o.list, "list", false, "list the ledger's snapshots and the retention bound, newest first")
	f.BoolVar(&o.follow, "follow", false, "keep taking snapshots by policy (--every, --interval) until interrupted")
	f.Uint64Var(&o.every, "every", 0, "with --follow: snapshot after this many seqs")
	f.DurationVar(&o.interval, "interval", 0, "with --follow: snapshot after this long (if anything was committed)")
	f.DurationVar(&o.poll, "poll", 10*time.Second, "with --follow: how often to read the ledger's head")
	f.BoolVar(&o.quiet, "quiet", false, "no progress output")
	f.BoolVar(&o.json, "json", false, "print the result as JSON")
	f.BoolVar(&o.adopt, "adopt", false, "attest the snapshots a release before attestations stored (once, on upgrading; admin)")
	return cmd
}

func (a *app) snapshotConfig(ctx context.Context) (snapshot.Config, error) {
	lg, err := a.Log(ctx)
	if err != nil {
		return snapshot.Config{}, err
	}
	bl, err := a.Blobs(ctx)
	if err != nil {
		return snapshot.Config{}, err
	}
	return snapshot.Config{Log: lg, Blobs: bl, Objects: bl, Logger: a.logger}, nil
}

func runSnapshot(cmd *cobra.Command, a *app, o snapshotOpts) error {
	ctx := cmd.Context()
	retain := cmd.Flags().Changed("retain-margin")
	if o.follow && o.every == 0 && o.interval <= 0 {
		return usagef("--follow needs --every or --interval")
	}
	if (o.every > 0 || o.interval > 0) && !o.follow {
		return usagef("--every and --interval go with --follow")
	}
	cfg, err := a.snapshotConfig(ctx)
	if err != nil {
		return err
	}
	if o.list {
		return listSnapshots(ctx, a, cfg, o.json)
	}
	if o.adopt {
		res, err := snapshot.Adopt(ctx, cfg)
		if err != nil {
			return err
		}
		if o.json {
			return a.printJSON(res)
		}
		for _, i := range res.Adopted {
			fmt.Fprintf(a.stdout, "attested snapshot at seq %d (%s)\n", i.Seq, i.Key)
		}
		for _, k := range res.Skipped {
			fmt.Fprintf(a.stdout, "not attested, does not read back: %s\n", k)
		}
		if res.Retained > 0 {
			fmt.Fprintf(a.stdout, "attested retention bound: seq %d\n", res.Retained)
		}
		return nil
	}
	if o.follow {
		rc := maintain.RunConfig{Config: cfg, Policy: maintain.Policy{Every: o.every, Interval: o.interval}, Poll: o.poll,
			Taken: func(r snapshot.TakeResult, rr *maintain.RetainResult) { a.printSnapshot(r, rr, o.json) }}
		if retain {
			rc.Margin = &o.margin
		}
		a.logger.Info("taking snapshots by policy", "every", o.every, "interval", o.interval, "retain", retain)
		return maintain.Run(ctx, rc)
	}
	pr := a.newProgress("snapshot", o.quiet)
	cfg.Progress = func(p snapshot.BuildProgress) {
		pr.update(host.Progress{Phase: "replay", Events: p.Events, EventsTotal: p.Total})
	}
	res, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{Full: o.full})
	pr.done()
	if err != nil {
		return err
	}
	var rr *maintain.RetainResult
	if retain {
		r, err := maintain.Retain(ctx, cfg, o.margin)
		if err != nil {
			return err
		}
		rr = &r
	}
	a.printSnapshot(res, rr, o.json)
	return nil
}

func (a *app) printSnapshot(r snapshot.TakeResult, rr *maintain.RetainResult, asJSON bool) {
	if asJSON {
		_ = a.printJSON(struct {
			snapshot.TakeResult
			Retain *maintain.RetainResult `json:"retain,omitempty"`
		}{r, rr})
		return
	}
	if r.UpToDate {
		fmt.Fprintf(a.stdout, "up to date: snapshot at seq %d (%s)\n", r.Info.Seq, r.Info.Key)
	} else {
		fmt.Fprintf(a.stdout, "snapshot at seq %d: %d files (%s) in %d partitions, %d events replayed from seq %d; %s, %s\n",
			r.Info.Seq, r.Entries, humanBytes(r.Bytes), r.Marks, r.Events, r.Base, r.Info.Key, humanBytes(r.Info.Size))
	}
	if rr != nil {
		if rr.Before == 0 {
			fmt.Fprintf(a.stdout, "retention: nothing to drop (snapshot at seq %d within the margin)\n", rr.Snapshot)
		} else {
			fmt.Fprintf(a.stdout, "retention: dropped %d events below seq %d (partition heads kept)\n", rr.Dropped, rr.Before)
		}
	}
}

func listSnapshots(ctx context.Context, a *app, cfg snapshot.Config, asJSON bool) error {
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return err
	}
	infos, err := snapshot.ListAttested(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return err
	}
	b, floor, err := snapshot.Floor(ctx, cfg.Log)
	if err != nil {
		return err
	}
	if asJSON {
		if infos == nil {
			infos = []snapshot.Info{}
		}
		return a.printJSON(struct {
			First     uint64          `json:"first"`
			Head      uint64          `json:"head"`
			Floor     uint64          `json:"floor"`
			Snapshots []snapshot.Info `json:"snapshots"`
		}{uint64(b.First), uint64(b.Last), uint64(floor), infos})
	}
	fmt.Fprintf(a.stdout, "stream: first seq %d, head %d; complete from seq %d\n", b.First, b.Last, floor)
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tSIZE\tWRITTEN\tUSABLE\tKEY")
	for _, si := range infos {
		usable := "yes"
		switch {
		case !si.Attested:
			usable = "no (not attested by the log: never used)"
		case si.Seq+1 < floor:
			usable = "no (events after it dropped)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", si.Seq, humanBytes(si.Size), si.ModTime.UTC().Format(time.RFC3339), usable, si.Key)
	}
	return w.Flush()
}

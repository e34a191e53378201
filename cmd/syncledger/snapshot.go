package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/maintain"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/snapshot"
)

type snapshotOpts struct {
	full, list, follow, quiet, json bool
	adopt                           bool
	margin                          uint64
	bound                           uint64
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
blobs may write under snapshots/ too; --list shows every object there, a
snapshot the stream does not attest marked as never used.

--adopt attests stored snapshots the stream does not: each one the log
verifies (it still holds the events up to it, and replaying them gives that
snapshot), and, on a ledger that never attested anything (made by a release
before attestations: the one-time upgrade), each one that reads back, with the
retention bound that release recorded, once the log does not contradict it.
A snapshot the log contradicts is never adopted. --adopt SEQ… adopts the
snapshots at those seqs on your word where the log can no longer verify them:
check --list first, and name only what you know an admin's syncledger wrote.

--retention-bound SEQ corrects the retention bound the stream attests (lower or
higher; 0 removes it), once the log holds every event from SEQ to its head:
a bound too high leaves no snapshot usable and none takeable.`,
		Example: `  syncledger snapshot
  syncledger snapshot --retain-margin 100000
  syncledger snapshot --follow --every 10000 --interval 1h --retain-margin 20000
  syncledger snapshot --list
  syncledger snapshot --adopt
  syncledger snapshot --adopt 120000
  syncledger snapshot --retention-bound 90001`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && !o.adopt {
				return usagef("unexpected arguments %q (seqs go with --adopt)", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSnapshot(cmd, a, o, args)
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
	f.BoolVar(&o.adopt, "adopt", false, "attest stored snapshots the log verifies, or that a release before attestations took; with SEQ… arguments, those snapshots (admin)")
	f.Uint64Var(&o.bound, "retention-bound", 0, "set the retention bound the stream attests to this seq, once the log holds every event from it (admin; 0 removes it)")
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

func runSnapshot(cmd *cobra.Command, a *app, o snapshotOpts, args []string) error {
	ctx := cmd.Context()
	retain := cmd.Flags().Changed("retain-margin")
	setBound := cmd.Flags().Changed("retention-bound")
	var seqs []ledger.Seq
	for _, arg := range args {
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || n == 0 {
			return usagef("--adopt %q: a snapshot's seq (snapshot --list shows them)", arg)
		}
		seqs = append(seqs, ledger.Seq(n))
	}
	if n := countTrue(o.list, o.adopt, setBound, o.follow); n > 1 {
		return usagef("--list, --adopt, --retention-bound and --follow go alone")
	}
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
		return adoptSnapshots(ctx, a, cfg, seqs, o.json)
	}
	if setBound {
		res, err := snapshot.SetRetention(ctx, cfg.Log, ledger.Seq(o.bound))
		if err != nil {
			return err
		}
		if o.json {
			return a.printJSON(res)
		}
		_, err = fmt.Fprintf(a.stdout, "retention bound: seq %d (was %d)\n", res.Now, res.Was)
		return err
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

func adoptSnapshots(ctx context.Context, a *app, cfg snapshot.Config, seqs []ledger.Seq, asJSON bool) error {
	res, err := snapshot.Adopt(ctx, cfg, snapshot.AdoptOptions{Seqs: seqs})
	if err != nil {
		return err
	}
	if asJSON {
		return a.printJSON(res)
	}
	for _, i := range res.Adopted {
		how := "verified against the log"
		switch {
		case i.Verified:
		case len(seqs) > 0:
			how = "on your word: the log no longer holds the events to verify it"
		default:
			how = "as a release before attestations took it: the log no longer holds the events to verify it"
		}
		fmt.Fprintf(a.stdout, "attested snapshot at seq %d (%s), %s\n", i.Seq, i.Key, how)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(a.stdout, "not attested: %s: %s\n", s.Key, s.Why)
	}
	if res.Retained > 0 {
		fmt.Fprintf(a.stdout, "attested retention bound: seq %d\n", res.Retained)
	}
	if res.RetentionSkipped != "" {
		fmt.Fprintf(a.stdout, "retention bound not attested: %s\n", res.RetentionSkipped)
	}
	if len(res.Adopted) == 0 && len(res.Skipped) == 0 {
		fmt.Fprintln(a.stdout, "nothing to adopt: every stored snapshot is attested")
	}
	return nil
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func listSnapshots(ctx context.Context, a *app, cfg snapshot.Config, asJSON bool) error {
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return err
	}
	objs, err := snapshot.Inventory(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return err
	}
	att, err := cfg.Log.Attested(ctx)
	if err != nil {
		return err
	}
	b, floor, err := snapshot.Floor(ctx, cfg.Log)
	if err != nil {
		return err
	}
	legacy := len(att.Snapshots) == 0 && att.Retained == 0
	var infos []snapshot.Info
	others := []snapshot.Object{}
	for _, o := range objs {
		if o.Info != nil {
			infos = append(infos, *o.Info)
		} else {
			others = append(others, o)
		}
	}
	slices.SortFunc(infos, func(x, y snapshot.Info) int { return cmp.Compare(y.Seq, x.Seq) }) // newest first
	if asJSON {
		if infos == nil {
			infos = []snapshot.Info{}
		}
		return a.printJSON(struct {
			First     uint64            `json:"first"`
			Head      uint64            `json:"head"`
			Floor     uint64            `json:"floor"`
			Retained  uint64            `json:"retained"` // the bound the stream attests (0: none)
			Legacy    bool              `json:"legacy"`   // the ledger never attested anything
			Snapshots []snapshot.Info   `json:"snapshots"`
			Others    []snapshot.Object `json:"others"` // every other object under snapshots/: never read
		}{uint64(b.First), uint64(b.Last), uint64(floor), uint64(att.Retained), legacy, infos, others})
	}
	fmt.Fprintf(a.stdout, "stream: first seq %d, head %d; complete from seq %d\n", b.First, b.Last, floor)
	switch {
	case att.Retained > b.Last+1:
		fmt.Fprintf(a.stdout, "the stream attests retention bound %d, above its head: ignored (an admin corrects it: syncledger snapshot --retention-bound SEQ)\n", att.Retained)
	case att.Retained > 0:
		fmt.Fprintf(a.stdout, "retention bound attested: seq %d\n", att.Retained)
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tSIZE\tWRITTEN\tUSABLE\tKEY")
	for _, si := range infos {
		usable := "yes"
		switch {
		case !si.Attested && legacy:
			usable = "no (not attested: a release before attestations took it, or anyone who writes blobs; snapshot --adopt checks it)"
		case !si.Attested:
			usable = "no (not attested: not taken by syncledger snapshot; never used)"
		case si.Seq > b.Last:
			usable = "no (above the head)"
		case si.Seq+1 < floor:
			usable = "no (events after it dropped)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", si.Seq, humanBytes(si.Size), si.ModTime.UTC().Format(time.RFC3339), usable, si.Key)
	}
	for _, o := range others {
		what := "no (not a snapshot of this ledger: never read)"
		if o.Kind == "retention" {
			what = "no (the retention bound a release before attestations recorded: never trusted; snapshot --adopt checks it on a ledger that never attested)"
		}
		fmt.Fprintf(w, "-\t%s\t%s\t%s\t%s\n", humanBytes(o.Size), o.ModTime.UTC().Format(time.RFC3339), what, oneLine(o.Key))
	}
	return w.Flush()
}

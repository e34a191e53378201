package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

func newRebuildCmd(a *app) *cobra.Command {
	var o struct {
		noSnapshot, lazy, quiet, json bool
	}
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild this host's cache from the newest snapshot and the ledger",
		Long: `Rebuild starts the cache (--cache) over: it restores the newest usable snapshot
(one after which the ledger still holds every commit; a corrupt one is skipped
with a warning and the next older one used), then applies the commits after it.
The result is what a host that synced live holds: the same files, modes, marks
and high-water mark.

Files already holding the right content are kept, others written, files the
ledger no longer has removed. A file changed locally (neither what the cache last
synced nor what the snapshot holds) stops the rebuild before anything is written
(exit 3): commit it or move it away. A sync whose high-water mark the ledger no
longer holds events after rebuilds the same way on its own.

A ledger that lost commits this cache applied (its server restored from an
older backup, or a copy of its data directory put back) is not rebuilt over
them: the cache's files of those commits, and its uncommitted changes, are set
aside under .syncledger/conflicts/<time>/, the cache rebuilt, and each put back
where the ledger does not hold something newer at its path, then the lost ones
republished (what a sync does on its own); the others stay there, listed.

A damaged state database (exit 4 from any command, error kind damaged-state)
is set aside as .syncledger/state.db.damaged-<time> and the state started over
from the ledger. With no index to tell a local edit from an older version of the
ledger's, every file that differs from the ledger, and every file it does not
hold, is moved to .syncledger/conflicts/<time>/ (the result lists them): copy
back what should be published and commit it. If that rebuild stops, every
command but rebuild (and sync, which finishes it) refuses the cache until it
has run to its end.

A progress bar is shown on a terminal, plain lines otherwise; --quiet silences it.`,
		Example: `  syncledger rebuild
  syncledger rebuild --no-snapshot   # from the ledger's events alone`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			h, err := a.Host(ctx)
			if err != nil {
				return err
			}
			// A rebuild replaces the index without an event for each file it
			// keeps: a running watch's dirty set cannot vouch for the cache
			// until the next full scan (told before, in case this process dies
			// midway, and after, so that no scan of the old index counts).
			dirty.Untrust(ctx, h.Dir().Root(), "the cache was rebuilt", a.logger)
			pr := a.newProgress("rebuild", o.quiet)
			res, err := h.Rebuild(ctx, host.RebuildOptions{NoSnapshot: o.noSnapshot, Lazy: o.lazy, Progress: pr.update})
			pr.done()
			dirty.Untrust(ctx, h.Dir().Root(), "the cache was rebuilt", a.logger)
			if err == nil && res.Healed != nil {
				// A rebuild on a ledger that lost commits this cache applied
				// kept them: publish them, as a sync would.
				err = h.Republish(ctx, res.Healed)
			}
			if err != nil {
				return err
			}
			if o.json {
				return a.printJSON(res)
			}
			if res.Healed != nil {
				printHealed(a, res.Healed)
			}
			from := "the ledger's events alone"
			if res.Snapshot > 0 {
				from = fmt.Sprintf("snapshot at seq %d", res.Snapshot)
			}
			fmt.Fprintf(a.stdout, "rebuilt from %s: %d files restored (%s), %d kept, %d removed; %d events replayed; hwm %d, head %d\n",
				from, res.Restored, humanBytes(res.Bytes), res.Kept, res.Removed, res.Replay.Events, res.HWM, res.Head)
			printRecovered(a, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.noSnapshot, "no-snapshot", false, "replay the ledger's events alone (they must all still be in the stream)")
	cmd.Flags().BoolVar(&o.lazy, "lazy", false, "lazy hydration: restore data/**/raw files as metadata only")
	cmd.Flags().BoolVar(&o.quiet, "quiet", false, "no progress output")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

// printRecovered says what a rebuild that started a damaged state over did
// with the cache's files that differed from the ledger.
func printRecovered(a *app, res host.RebuildResult) {
	if res.Damaged != "" {
		fmt.Fprintf(a.stdout, "the damaged state database is kept as %s\n", res.Damaged)
	}
	if len(res.KeptAside) > 0 {
		fmt.Fprintf(a.stdout, "kept %d files that differ from the ledger (local edits, or versions the ledger has since replaced) under %s:\n",
			len(res.KeptAside), res.KeptIn)
		printPaths(a, res.KeptAside)
		fmt.Fprintln(a.stdout, "copy back the ones to publish, then 'syncledger commit'")
	}
}

// progress shows a long operation's host.Progress on stderr: a progress bar on a
// terminal, a plain line every few seconds otherwise, nothing when quiet. The
// host package stays free of UI: it only calls update.
type progress struct {
	verb  string
	w     io.Writer
	tty   bool
	quiet bool
	every time.Duration

	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	phase string
	last  time.Time
	start time.Time
	p     host.Progress
}

func (a *app) newProgress(verb string, quiet bool) *progress {
	tty := false
	w := a.stderr
	if sw, ok := w.(scrubWriter); ok {
		w = sw.w // the terminal is under the scrubbing
	}
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	now := time.Now()
	return &progress{verb: verb, w: a.stderr, tty: tty, quiet: quiet, every: 2 * time.Second, start: now, last: now}
}

// update takes a progress report; safe for concurrent use.
func (p *progress) update(hp host.Progress) {
	if p == nil || p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p = hp
	if p.tty {
		p.drawBar(hp)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		fmt.Fprintln(p.w, p.line(hp))
	}
}

func (p *progress) drawBar(hp host.Progress) {
	if hp.Phase != p.phase || p.bar == nil {
		if p.bar != nil {
			_ = p.bar.Finish()
			fmt.Fprintln(p.w)
		}
		p.phase = hp.Phase
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.verb + ": " + hp.Phase),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionSetWidth(30),
		}
		total := int64(hp.EventsTotal)
		if hp.Phase == "replay" {
			opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"))
		} else {
			total = hp.BytesTotal
			opts = append(opts, progressbar.OptionShowBytes(true))
		}
		p.bar = progressbar.NewOptions64(max(total, 1), opts...)
	}
	if hp.Phase == "replay" {
		_ = p.bar.Set64(int64(hp.Events))
		return
	}
	p.bar.Describe(fmt.Sprintf("%s: %s %d/%d files", p.verb, hp.Phase, hp.Files, hp.FilesTotal))
	_ = p.bar.Set64(hp.Bytes)
}

// line is the plain form: files, bytes, events, rate, ETA.
func (p *progress) line(hp host.Progress) string {
	el := time.Since(p.start)
	s := fmt.Sprintf("%s: %s", p.verb, hp.Phase)
	if hp.FilesTotal > 0 || hp.Files > 0 {
		s += fmt.Sprintf(" %d/%d files, %s/%s", hp.Files, hp.FilesTotal, humanBytes(hp.Bytes), humanBytes(hp.BytesTotal))
	}
	if hp.EventsTotal > 0 {
		s += fmt.Sprintf(" %d/%d events", hp.Events, hp.EventsTotal)
		if rate := float64(hp.Events) / el.Seconds(); rate > 0 {
			eta := time.Duration(float64(hp.EventsTotal-min(hp.Events, hp.EventsTotal)) / rate * float64(time.Second))
			s += fmt.Sprintf(", %.0f events/s, ETA %s", rate, eta.Round(time.Second))
		}
	}
	return s + fmt.Sprintf(" (%s)", el.Round(time.Second))
}

// done ends the display.
func (p *progress) done() {
	if p == nil || p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	} else if !p.tty && time.Since(p.start) >= p.every && p.phase != "" {
		fmt.Fprintln(p.w, p.line(p.p))
	}
}

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
)

type logOpts struct {
	from       uint64
	models     []string
	partitions []string
	json       bool
	follow     bool
}

func newLogCmd(a *app) *cobra.Command {
	var o logOpts
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Print the ledger's commits",
		Long: `Print the ledger's commits in stream order.

Human output is one line per commit: its seq (the seq of its last event), time,
host, commit id, partitions, file count and message. With --json, one JSON object
per event: {"seq":N,"event":{…}} with the event in its wire format.

--model TYPE:ID and --partition KEY (both repeatable) restrict the output to those
partitions, read through the per-partition index; a commit that also touched
other partitions shows "(k of n)". --follow keeps printing new commits until
interrupted.

Reading from a seq the ledger no longer holds exits 4 (needs a snapshot rebuild).`,
		Example: `  syncledger log
  syncledger log --from 120 --json
  syncledger log --model command/shell:0d8c6f4e --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLog(cmd.Context(), a, o)
		},
	}
	fs := cmd.Flags()
	fs.Uint64Var(&o.from, "from", 0, "first seq to print (default: the ledger's first)")
	fs.StringArrayVar(&o.models, "model", nil, "only this model's partitions, as TYPE:ID (swamp's model type and id); repeatable")
	fs.StringArrayVar(&o.partitions, "partition", nil, "only this partition key; repeatable")
	fs.BoolVar(&o.json, "json", false, "one JSON object per event")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing new commits until interrupted")
	return cmd
}

// parseModel splits TYPE:ID at the last colon (a type may hold "::").
func parseModel(s string) (typ, id string, err error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", usagef("--model %q: want TYPE:ID, such as command/shell:0d8c6f4e", s)
	}
	return s[:i], s[i+1:], nil
}

// partitionKeys returns the partitions --model and --partition select, nil for all.
func (o logOpts) partitionKeys() ([]string, error) {
	var keys []string
	for _, m := range o.models {
		typ, id, err := parseModel(m)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ledger.PartitionKeysForModel(typ, id)...)
	}
	for _, p := range o.partitions {
		if p == "" {
			return nil, usagef("--partition: empty key")
		}
		keys = append(keys, p)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

func runLog(ctx context.Context, a *app, o logOpts) error {
	keys, err := o.partitionKeys()
	if err != nil {
		return err
	}
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	b, err := l.Bounds(ctx)
	if err != nil {
		return fmt.Errorf("read ledger bounds: %w", err)
	}
	from := ledger.Seq(o.from)
	switch {
	case from == 0:
		from = b.First
	case from < b.First:
		return fmt.Errorf("log: %w", &ledger.TruncatedError{From: from, First: b.First})
	}
	p := &logPrinter{a: a, ctx: ctx, json: o.json, commits: ledger.Commits{Filtered: true}}
	if keys != nil {
		p.filter = make(map[string]bool, len(keys))
		for _, k := range keys {
			p.filter[k] = true
		}
	}
	switch {
	case o.follow:
		err = l.Follow(ctx, from, p.add)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			err = nil // interrupted: the normal end of --follow
		}
	case keys != nil:
		var recs []ledger.Record
		for _, k := range keys {
			err = l.ReadPartition(ctx, k, from, func(r ledger.Record) error {
				recs = append(recs, r)
				return nil
			})
			if err != nil {
				break
			}
		}
		slices.SortFunc(recs, func(x, y ledger.Record) int { return cmp.Compare(x.Seq, y.Seq) })
		for _, r := range recs {
			if err == nil {
				err = p.add(r)
			}
		}
	case from <= b.Last:
		err = l.Read(ctx, from, 0, p.add)
	}
	if ferr := p.flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("read ledger %q: %w", a.ledgerName, err)
	}
	return nil
}

// logPrinter prints records as they are read: each event as a JSON line, or one
// line per commit, grouped by the one grouper (ledger.Commits, filtered: a
// partition filter's read holds some parts of a commit only).
type logPrinter struct {
	a       *app
	ctx     context.Context
	json    bool
	filter  map[string]bool // nil: every partition
	commits ledger.Commits

	blobs     *ledger.Bucket
	blobsErr  error
	blobsOpen bool
}

func (p *logPrinter) add(r ledger.Record) error {
	if !p.json {
		if err := p.commits.Add(r, p.print); err != nil {
			return err
		}
	}
	if r.Skip != nil {
		return p.skipped(r)
	}
	if !p.json || p.filter != nil && !p.filter[r.Event.Partition] {
		return nil
	}
	b, err := ledger.EncodeEvent(r.Event)
	if err != nil {
		return fmt.Errorf("seq %d: %w", r.Seq, err)
	}
	return p.a.printJSON(struct {
		Seq   ledger.Seq      `json:"seq"`
		Event json.RawMessage `json:"event"`
	}{r.Seq, b})
}

// skipped prints a quarantined message, a quarantine notice, or a lock's
// fence record or check: one line (one {"seq", "quarantined"},
// {"seq", "quarantine"}, {"seq", "fence"} or {"seq", "fenceCheck"} object with
// --json).
func (p *logPrinter) skipped(r ledger.Record) error {
	sk := r.Skip
	if p.filter != nil && (sk.Notice || !p.filter[sk.Partition]) {
		return nil
	}
	if sk.Fence != nil || sk.Check != nil {
		return p.fence(r)
	}
	q := sk.Quarantine
	if p.json {
		key := "quarantined"
		if sk.Notice {
			key = "quarantine"
		}
		return p.a.printJSON(map[string]any{"seq": r.Seq, key: q})
	}
	var line string
	if sk.Notice {
		line = fmt.Sprintf("%6d  %s  %s  quarantine of seq %d: %s", r.Seq, q.At.UTC().Format(time.RFC3339), oneLine(q.By), q.Seq, oneLine(q.Reason))
	} else {
		line = fmt.Sprintf("%6d  quarantined (partition %s) by %s at %s: %s", r.Seq, oneLine(sk.Partition), oneLine(q.By), q.At.UTC().Format(time.RFC3339), oneLine(q.Reason))
	}
	_, err := fmt.Fprintln(p.a.stdout, line)
	return err
}

// fence prints a lock's fence record (a holder took the lock) or a fenced
// commit's check (ledger.Fence).
func (p *logPrinter) fence(r ledger.Record) error {
	sk := r.Skip
	if p.json {
		if sk.Fence != nil {
			return p.a.printJSON(map[string]any{"seq": r.Seq, "fence": sk.Fence})
		}
		return p.a.printJSON(map[string]any{"seq": r.Seq, "fenceCheck": sk.Check})
	}
	var line string
	if f := sk.Fence; f != nil {
		line = fmt.Sprintf("%6d  %s  %s  took lock %s", r.Seq, f.At.UTC().Format(time.RFC3339), oneLine(f.Host), oneLine(f.Lock))
		if f.Holder != "" {
			line += " (" + oneLine(f.Holder) + ")"
		}
	} else {
		c := sk.Check
		line = fmt.Sprintf("%6d  commit %s made under lock %s (its fence record seq %d)", r.Seq, c.Commit, oneLine(c.Lock), c.Fence)
	}
	_, err := fmt.Fprintln(p.a.stdout, line)
	return err
}

// manifestLen counts a manifest's entries, fetching it from the blob store.
func (p *logPrinter) manifestLen(e ledger.Event) (int, bool) {
	if !p.blobsOpen {
		p.blobsOpen = true
		p.blobs, p.blobsErr = p.a.Blobs(p.ctx)
		if p.blobsErr != nil {
			p.a.logger.Warn("file counts of large commits are unknown: cannot open the blob store", "err", p.blobsErr)
		}
	}
	if p.blobsErr != nil {
		return 0, false
	}
	b, err := ledger.ReadBlob(p.ctx, p.blobs, e.Manifest)
	if err == nil {
		var es []ledger.Entry
		if es, err = ledger.DecodeManifest(b, e.Partition); err == nil {
			return len(es), true
		}
	}
	p.a.logger.Warn("cannot read manifest", "commit", e.Commit, "partition", e.Partition, "err", err)
	return 0, false
}

// flush prints the commit a read ended inside of.
func (p *logPrinter) flush() error {
	if recs := p.commits.Pending(); len(recs) > 0 {
		return p.print(recs)
	}
	return nil
}

// print prints one line for a commit's records that pass the filter.
func (p *logPrinter) print(recs []ledger.Record) error {
	var partitions []string
	var last ledger.Record
	files, unknown := 0, false
	for _, r := range recs {
		e := r.Event
		if p.filter != nil && !p.filter[e.Partition] {
			continue
		}
		if partitions == nil {
			last = r
		}
		last.Seq = r.Seq
		partitions = append(partitions, e.Partition)
		if e.Manifest.IsZero() {
			files += len(e.Entries)
		} else if n, ok := p.manifestLen(e); ok {
			files += n
		} else {
			unknown = true
		}
	}
	if partitions == nil {
		return nil
	}
	ev := last.Event // the first printed part's event, at the last printed part's seq
	parts := strings.Join(partitions, ",")
	if len(partitions) < ev.Parts {
		parts += fmt.Sprintf(" (%d of %d)", len(partitions), ev.Parts)
	}
	n := strconv.Itoa(files)
	if unknown {
		n += "+?"
	}
	n += " files"
	if n == "1 files" {
		n = "1 file"
	}
	line := fmt.Sprintf("%6d  %s  %s  %s  %s  %s", last.Seq, ev.At.UTC().Format(time.RFC3339), oneLine(ev.Host), ev.Commit, parts, n)
	if ev.Message != "" {
		line += "  " + oneLine(ev.Message)
	}
	_, err := fmt.Fprintln(p.a.stdout, line)
	return err
}

// oneLine replaces control characters so a field cannot break the line format.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

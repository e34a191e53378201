package snapshot

import (
	"context"
	"fmt"
	"slices"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

// BuildConfig says what Build replays.
type BuildConfig struct {
	Log   ledger.CommitLog
	Blobs ledger.BlobStore // manifests of events too large to inline
	// Base is the state to start from (a snapshot); nil starts from an empty
	// ledger (seq 0) and replays the whole log.
	Base *Snapshot
	// To is the last seq to replay; 0 means the log's last seq. The result ends at
	// the last commit completed at or below To.
	To ledger.Seq
	// Partitions, when set, limits the state to these partitions (their entries
	// and marks); the other partitions' events are not read into it.
	Partitions []string
	// Progress, when set, is called every few thousand events.
	Progress func(BuildProgress)
}

// BuildProgress reports how far a Build has read.
type BuildProgress struct {
	Seq    ledger.Seq // last seq read
	Events uint64     // events read
	Total  uint64     // events to read
}

// batch is how many events one core Ready covers in Build.
const batch = 4096

// Build replays the log's events after Base, up to To, into Base's state in
// memory, and returns the state at the last commit boundary reached — metadata
// only: no blob is fetched except manifests, no file is written. It drives the
// projector core exactly as a host's full sync does (the same apply rules), so a
// host that applied the same events holds the same index, marks and HWM.
//
// A commit is offered to the core only once all its parts are read: a commit
// whose last part is beyond To (or not yet stored) is left out whole.
func Build(ctx context.Context, cfg BuildConfig) (*Snapshot, error) {
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("build snapshot: read ledger info: %w", err)
	}
	base := cfg.Base
	if base == nil {
		base = &Snapshot{Ledger: info.UUID}
	}
	if base.Ledger != info.UUID {
		return nil, fmt.Errorf("build snapshot: snapshot of ledger %s, log %q is ledger %s: %w", base.Ledger, info.Name, info.UUID, ledger.ErrLineage)
	}
	mode := projector.Full
	keep := func(string) bool { return true }
	if len(cfg.Partitions) > 0 {
		mode = projector.Scoped
		keep = func(p string) bool { return slices.Contains(cfg.Partitions, p) }
		base = base.Filter(keep)
	}
	core, err := projector.New(base.State(), projector.Config{})
	if err != nil {
		return nil, fmt.Errorf("build snapshot: %w", err)
	}
	if err := core.AdoptLineage(info); err != nil {
		return nil, fmt.Errorf("build snapshot: %w", err)
	}
	b := &builder{cfg: cfg, core: core, mode: mode, seqs: make(map[string]ledger.Seq, len(base.Entries)), end: base.Seq}
	for _, e := range base.Entries {
		b.seqs[e.Path] = e.Seq
	}
	if err := b.flush(); err != nil { // the adopted lineage
		return nil, err
	}
	to := cfg.To
	if to == 0 {
		if to, err = cfg.Log.LastSeq(ctx); err != nil {
			return nil, fmt.Errorf("build snapshot: read last seq: %w", err)
		}
	}
	if to > base.Seq {
		b.total = uint64(to - base.Seq)
		err = cfg.Log.Read(ctx, base.Seq+1, to, func(rec ledger.Record) error { return b.offer(ctx, rec, keep) })
		if err == nil {
			err = b.flush()
		}
		if err != nil {
			return nil, fmt.Errorf("build snapshot from seq %d to %d: %w", base.Seq+1, to, err)
		}
	}
	if mode == projector.Full && core.HWM() != b.end {
		return nil, fmt.Errorf("build snapshot: replay ended at seq %d but the HWM is %d: broken invariant", b.end, core.HWM())
	}
	out := &Snapshot{Ledger: info.UUID, Name: info.Name, Seq: b.end, Marks: core.State().Marks}
	out.Entries = make([]Entry, 0, len(b.seqs))
	for p, f := range core.Files() {
		out.Entries = append(out.Entries, Entry{Path: p, SHA256: f.SHA256, Size: f.Size, Mode: f.Mode, Seq: b.seqs[p]})
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("build snapshot: %w", err)
	}
	return out, nil
}

type builder struct {
	cfg     BuildConfig
	core    *projector.Core
	mode    projector.Mode
	seqs    map[string]ledger.Seq // path → seq that wrote it
	commit  []ledger.Record       // parts of the commit being read
	pending int
	end     ledger.Seq // the last commit end offered
	events  uint64
	total   uint64
}

func (b *builder) offer(ctx context.Context, rec ledger.Record, keep func(string) bool) error {
	b.events++
	if b.cfg.Progress != nil && b.events%batch == 0 {
		b.cfg.Progress(BuildProgress{Seq: rec.Seq, Events: b.events, Total: b.total})
	}
	// A skipped record (ledger.Skip) is a commit of its own; one that cuts a
	// commit short ends it there, as it does for a host's core.
	if n := len(b.commit); n > 0 && rec.Skip == nil {
		last := b.commit[n-1]
		if rec.Event.Commit != last.Event.Commit || rec.Event.Part != last.Event.Part+1 || rec.Seq != last.Seq+1 {
			return fmt.Errorf("seq %d (part %d/%d of commit %s) follows part %d/%d of commit %s: %w", rec.Seq,
				rec.Event.Part, rec.Event.Parts, rec.Event.Commit, last.Event.Part, last.Event.Parts, last.Event.Commit, ledger.ErrInvalid)
		}
	}
	b.commit = append(b.commit, rec)
	if !rec.LastOfCommit() {
		return nil
	}
	for _, r := range b.commit {
		p := r.Event.Partition
		if r.Skip != nil {
			p = r.Skip.Partition
		}
		if !keep(p) {
			continue
		}
		if err := b.step(ctx, r); err != nil {
			return err
		}
	}
	b.commit = b.commit[:0]
	b.end = rec.Seq
	if b.pending >= batch {
		return b.flush()
	}
	return nil
}

func (b *builder) step(ctx context.Context, rec ledger.Record) error {
	v, err := b.core.Classify(b.mode, rec)
	if err != nil {
		return fmt.Errorf("seq %d: %w", rec.Seq, err)
	}
	if v == projector.Apply && !rec.Event.Manifest.IsZero() && len(rec.Event.Entries) == 0 {
		if b.cfg.Blobs == nil {
			return fmt.Errorf("seq %d has a manifest and no blob store was given: %w", rec.Seq, ledger.ErrInvalid)
		}
		m, err := ledger.ReadBlob(ctx, b.cfg.Blobs, rec.Event.Manifest)
		if err != nil {
			return fmt.Errorf("read manifest of seq %d: %w", rec.Seq, err)
		}
		if rec.Event.Entries, err = ledger.DecodeManifest(m, rec.Event.Partition); err != nil {
			return fmt.Errorf("manifest of seq %d: %w", rec.Seq, err)
		}
	}
	if _, err := b.core.Step(b.mode, rec); err != nil {
		return fmt.Errorf("seq %d: %w", rec.Seq, err)
	}
	b.pending++
	return nil
}

// flush makes the staged work durable — in memory: the core's Ready needs no I/O.
func (b *builder) flush() error {
	if !b.core.HasReady() {
		return nil
	}
	rd := b.core.Ready()
	for _, ch := range rd.Changes {
		if ch.New == nil {
			delete(b.seqs, ch.Path)
		} else if ch.Seq != 0 {
			b.seqs[ch.Path] = ch.Seq
		}
	}
	b.pending = 0
	return b.core.Advance(rd)
}

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
	Blobs *ledger.Bucket // manifests of events too large to inline
	// Base is the state to start from (a snapshot); nil starts from an empty
	// ledger (seq 0) and replays the whole log.
	Base *Snapshot
	// To is the last seq to replay; 0 means the log's last seq. The result ends at
	// the last commit completed at or below To.
	To ledger.Seq
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
	b, info, err := build(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	if b.core.HWM() != b.end {
		return nil, fmt.Errorf("build snapshot: replay ended at seq %d but the HWM is %d: broken invariant", b.end, b.core.HWM())
	}
	out := &Snapshot{Ledger: info.UUID, Name: info.Name, Seq: b.end, Marks: b.marks(), Entries: b.entries()}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("build snapshot: %w", err)
	}
	return out, nil
}

// Partial is the state of some partitions only, as of a seq: their files and
// marks. It is not a Snapshot and cannot be stored as one: it has no HWM (a
// scoped replay never moves it, swamp-club#3193), so no host could start from it.
type Partial struct {
	Ledger  string                    // the ledger's UUID
	Name    string                    // the ledger's name, for messages
	Through ledger.Seq                // the last commit end read; the other partitions' events up to it were not applied
	Marks   map[string]projector.Mark // partition → mark, for the chosen partitions
	Entries []Entry                   // in path order, distinct; of the chosen partitions only
}

// Bytes returns the total content size of the entries.
func (p *Partial) Bytes() int64 { return (&Snapshot{Entries: p.Entries}).Bytes() }

// BuildPartial is Build limited to partitions: Base's entries and marks of
// those partitions, plus their events after Base up to To, replayed as a scoped
// sync replays them. The other partitions' events are read (to find commit
// boundaries) but not applied.
func BuildPartial(ctx context.Context, cfg BuildConfig, partitions []string) (*Partial, error) {
	if len(partitions) == 0 {
		return nil, fmt.Errorf("build partial state: no partitions given: %w", ledger.ErrInvalid)
	}
	b, info, err := build(ctx, cfg, partitions)
	if err != nil {
		return nil, err
	}
	out := &Partial{Ledger: info.UUID, Name: info.Name, Through: b.end, Marks: b.marks(), Entries: b.entries()}
	// The same consistency checks as a snapshot's, at the seq read through.
	check := &Snapshot{Ledger: out.Ledger, Name: out.Name, Seq: out.Through, Marks: out.Marks, Entries: out.Entries}
	if err := check.Validate(); err != nil {
		return nil, fmt.Errorf("build partial state: %w", err)
	}
	return out, nil
}

// build replays the log as Build does; partitions, when set, limit it to them
// (a scoped replay).
func build(ctx context.Context, cfg BuildConfig, partitions []string) (*builder, ledger.Info, error) {
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return nil, info, fmt.Errorf("build snapshot: read ledger info: %w", err)
	}
	base := cfg.Base
	if base == nil {
		base = &Snapshot{Ledger: info.UUID}
	}
	if base.Ledger != info.UUID {
		return nil, info, fmt.Errorf("build snapshot: snapshot of ledger %s, log %q is ledger %s: %w", base.Ledger, info.Name, info.UUID, ledger.ErrLineage)
	}
	mode := projector.Full
	keep := func(string) bool { return true }
	if len(partitions) > 0 {
		mode = projector.Scoped
		keep = func(p string) bool { return slices.Contains(partitions, p) }
		base = base.Filter(keep)
	}
	store, err := projector.NewMemoryStorage(base.State())
	if err != nil {
		return nil, info, fmt.Errorf("build snapshot: %w", err)
	}
	core, err := projector.New(store, projector.Config{})
	if err != nil {
		return nil, info, fmt.Errorf("build snapshot: %w", err)
	}
	if err := core.AdoptLineage(info); err != nil {
		return nil, info, fmt.Errorf("build snapshot: %w", err)
	}
	b := &builder{cfg: cfg, core: core, store: store, mode: mode, keep: keep, seqs: make(map[string]ledger.Seq, len(base.Entries)), end: base.Seq}
	for _, e := range base.Entries {
		b.seqs[e.Path] = e.Seq
	}
	if err := b.flush(); err != nil { // the adopted lineage
		return nil, info, err
	}
	to := cfg.To
	if to == 0 {
		if to, err = cfg.Log.LastSeq(ctx); err != nil {
			return nil, info, fmt.Errorf("build snapshot: read last seq: %w", err)
		}
	}
	if to > base.Seq {
		b.total = uint64(to - base.Seq)
		err = ledger.ReadCommits(ctx, cfg.Log, base.Seq+1, to, func(recs []ledger.Record) error { return b.offer(ctx, recs) })
		if err == nil {
			err = b.flush()
		}
		if err != nil {
			return nil, info, fmt.Errorf("build snapshot from seq %d to %d: %w", base.Seq+1, to, err)
		}
	}
	return b, info, nil
}

// entries returns the core's files with the seqs that wrote them, in path order.
func (b *builder) entries() []Entry {
	out := make([]Entry, 0, len(b.seqs))
	_ = b.store.Files("", func(p string, f projector.File) bool { // a MemoryStorage's reads do not fail
		out = append(out, Entry{Path: p, SHA256: f.SHA256, Size: f.Size, Mode: f.Mode, Seq: b.seqs[p]})
		return true
	})
	return out
}

// marks returns the core's marks.
func (b *builder) marks() map[string]projector.Mark {
	out := map[string]projector.Mark{}
	_ = b.store.Marks(func(p string, m projector.Mark) bool { out[p] = m; return true })
	return out
}

type builder struct {
	cfg     BuildConfig
	core    *projector.Core
	store   *projector.MemoryStorage // the core's durable state, in memory
	mode    projector.Mode
	keep    func(partition string) bool
	seqs    map[string]ledger.Seq // path → seq that wrote it
	pending int
	end     ledger.Seq // the last commit end offered
	events  uint64
	total   uint64
}

// offer steps the core through one commit's records: a complete commit, or
// one a skipped record (ledger.Skip) cut short, the skip ending it there as it
// does for a host's core.
func (b *builder) offer(ctx context.Context, recs []ledger.Record) error {
	for _, r := range recs {
		b.events++
		if b.cfg.Progress != nil && b.events%batch == 0 {
			b.cfg.Progress(BuildProgress{Seq: r.Seq, Events: b.events, Total: b.total})
		}
		p := r.Event.Partition
		if r.Skip != nil {
			p = r.Skip.Partition
		}
		if !b.keep(p) {
			continue
		}
		if err := b.step(ctx, r); err != nil {
			return err
		}
	}
	b.end = recs[len(recs)-1].Seq
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

// flush makes the staged work durable — in memory: the core's Ready needs no
// I/O, and persists into the MemoryStorage.
func (b *builder) flush() error {
	if !b.core.HasReady() {
		return nil
	}
	rd, err := b.core.Ready()
	if err != nil {
		return err
	}
	for _, ch := range rd.Changes {
		if ch.New == nil {
			delete(b.seqs, ch.Path)
		} else if ch.Seq != 0 {
			b.seqs[ch.Path] = ch.Seq
		}
	}
	b.pending = 0
	b.store.Apply(rd)
	b.core.Advance(rd)
	return nil
}

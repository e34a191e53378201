package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/statedb"
)

// SyncOptions selects what a sync reads.
type SyncOptions struct {
	// Partitions, when set, makes the sync scoped: only these partitions are read,
	// from their marks, and the HWM does not move.
	Partitions []string
	// Lazy applies data/**/raw files as metadata only (swamp's lazy hydration).
	// A sync without Lazy hydrates files an earlier lazy sync left out.
	Lazy bool
	// Progress, when set, is called after each applied batch.
	Progress func(SyncResult)
	// NoRepublish: when the sync heals a cache whose ledger lost commits it
	// applied (heal.go), it puts back what the ledger lost and leaves it
	// uncommitted, for the caller to publish (swamp renumbers first);
	// otherwise the sync commits it.
	NoRepublish bool
	// Together, when set, names the group a path belongs to ("" for none):
	// a heal puts back a group's files, or keeps them aside, together.
	Together func(path string) string
	// Fresh: the sync must see every commit the origin stored before it
	// began — the caller holds a lock on what it syncs (swamp's model lock)
	// and acts on "nothing new". A log read from a mirror may lag: a fresh
	// sync first asks the origin for its head (one request no mirror
	// answers), and the log then reads at least up to it.
	Fresh bool
}

// SyncResult says what a sync did.
type SyncResult struct {
	UpToDate bool       `json:"upToDate"` // the fast path answered: nothing to read
	Scoped   bool       `json:"scoped"`
	Head     ledger.Seq `json:"head"`   // the log's last seq the sync read up to
	HWM      ledger.Seq `json:"hwm"`    // the HWM after the sync
	Events   int        `json:"events"` // records read
	Applied  int        `json:"applied"`
	Written  int        `json:"written"`
	Deleted  int        `json:"deleted"`
	Lazy     int        `json:"lazy"`
	Bytes    int64      `json:"bytes"`
	Paths    []string   `json:"paths,omitempty"` // written or deleted
	// Rebuilt: the log no longer held the events this cache needed, so the sync
	// rebuilt it from a snapshot (counts include the restore).
	Rebuilt bool `json:"rebuilt,omitempty"`
	// Healed: the ledger had lost commits this cache applied (a server
	// restored from an older backup); the sync rebuilt the cache from the
	// ledger and put back what it lost, republished (heal.go).
	Healed *Healed `json:"healed,omitempty"`
	// Source is where the head the sync went by came from, and how stale
	// it may be: the origin, or a mirror as of its last contact with the
	// origin (nil: a scoped sync that asked only its partitions).
	Source *ledger.Head `json:"source,omitempty"`
}

func (r *SyncResult) add(a applied) {
	r.Written += a.Written
	r.Deleted += a.Deleted
	r.Lazy += a.Lazy
	r.Bytes += a.Bytes
	r.Paths = append(r.Paths, a.Paths...)
}

// scopedRequests bounds the partition requests a scoped sync has in flight.
const scopedRequests = 16

// errStop ends a partition read early.
var errStop = errors.New("stop")

// Sync brings the cache up to date with the log (full) or with some partitions
// (scoped).
func (h *Host) Sync(ctx context.Context, opt SyncOptions) (_ SyncResult, err error) {
	ctx, done := h.watching(ctx, "sync")
	defer func() { err = done(err) }()
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return SyncResult{}, aerr
	}
	defer release()
	if seq, ok, err := h.db.Restoring(); err != nil {
		return SyncResult{}, err
	} else if ok {
		return h.finishRebuild(ctx, opt, seq) // rebuild.go
	}
	if h.healing() {
		return h.healSync(ctx, opt, nil) // heal.go: an interrupted heal
	}
	var source *ledger.Head
	if opt.Fresh {
		oh, err := h.logPort().Head(ctx, ledger.HeadRequest{Origin: true})
		if err != nil {
			return SyncResult{}, fmt.Errorf("read the origin's head: %w", err)
		}
		source = &oh
	}
	if len(opt.Partitions) > 0 {
		res, err := h.syncScoped(ctx, opt)
		var fe *ForkError
		if errors.As(err, &fe) {
			return h.healSync(ctx, opt, fe)
		}
		if res.Source == nil {
			res.Source = source
		}
		return res, err
	}
	_, uuid, hwm, err := h.checkLineage(ctx)
	if err != nil {
		return SyncResult{}, err
	}
	top, err := h.db.TopCommit()
	if err != nil {
		return SyncResult{}, err
	}
	var hd ledger.Head
	if source != nil {
		hd = *source // the origin's own answer: nothing is fresher
	} else {
		hd, err = h.logPort().Head(ctx, ledger.HeadRequest{})
	}
	if err == nil && hd.Seq < hwm && source == nil {
		// The answer may predate commits another process applied to this
		// cache since (a log answers its first head from its opening), or
		// be a mirror's that lags this cache's own commits: only the
		// origin's answer below the HWM is a rewound log.
		hd, err = h.logPort().Head(ctx, ledger.HeadRequest{Origin: true})
	}
	if err != nil {
		return SyncResult{}, fmt.Errorf("read last seq: %w", err)
	}
	head, stamp := hd.Seq, hd.Stamp
	// Identity, not seq alone: the log's commit at the HWM's commit must be
	// the one this cache applied (identity.go) — also, and above all, when
	// the head is the HWM.
	if err := h.checkHead(ctx, top, head, stamp, hwm); err != nil {
		var fe *ForkError
		if errors.As(err, &fe) {
			return h.healSync(ctx, opt, fe)
		}
		return SyncResult{Head: head, HWM: hwm, Source: &hd}, err
	}
	lazy, err := h.db.LazyCount()
	if err != nil {
		return SyncResult{}, err
	}
	if head == hwm && (uuid != "" || head == 0) && (opt.Lazy || lazy == 0) {
		return SyncResult{UpToDate: true, Head: head, HWM: hwm, Source: &hd}, nil // the fast path: one request
	}
	s, err := h.load(ctx, opt.Lazy)
	if err != nil {
		return SyncResult{}, err
	}
	s.head = statedb.Commit{Seq: head, ID: stamp}
	res := SyncResult{Head: head, Source: &hd}
	if head > hwm {
		err = h.readFull(ctx, s, hwm+1, head, &res, opt.Progress)
		// A full cache: what the rest of the pull, from the HWM it reached,
		// writes.
		err = h.noSpace(ctx, err, s.core.HWM()+1, head, opt.Lazy)
	}
	if errors.Is(err, ledger.ErrTruncated) {
		return h.rebuildAfterTruncation(ctx, opt, err) // rebuild.go
	}
	var re *ledger.RecordError
	if errors.As(err, &re) {
		// A message the core refuses after a server restore: the fork, not
		// the message, is what to act on (never a quarantine).
		var fe *ForkError
		if cerr := h.checkLastCommit(ctx); errors.As(cerr, &fe) {
			return h.healSync(ctx, opt, fe)
		}
	}
	if err == nil && !opt.Lazy && lazy > 0 {
		err = h.noSpace(ctx, h.hydrateAll(ctx, s, &res), 1, 0, false)
	}
	res.HWM = s.core.HWM()
	return res, err
}

// run accumulates records into Readies and applies them.
type run struct {
	h        *Host
	s        *session
	res      *SyncResult
	pending  int
	progress func(SyncResult)
}

func (r *run) flush(ctx context.Context) error {
	if r.pending == 0 && !r.s.core.HasReady() {
		return nil
	}
	rd, err := r.s.core.Ready()
	if err != nil {
		return err
	}
	a, err := r.h.applyReady(ctx, r.s, rd, nil)
	r.res.add(a)
	r.pending = 0
	if err != nil {
		return err
	}
	r.res.HWM = r.s.core.HWM()
	if r.progress != nil {
		r.progress(*r.res)
	}
	return nil
}

// resolve replaces a manifest by its entries.
func (r *run) resolve(ctx context.Context, rec *ledger.Record) error {
	if rec.Event.Manifest.IsZero() || len(rec.Event.Entries) > 0 {
		return nil
	}
	b, err := ledger.ReadBlob(ctx, r.h.blobsPort(), rec.Event.Manifest)
	if err != nil {
		return fmt.Errorf("read manifest of seq %d: %w", rec.Seq, err)
	}
	es, err := ledger.DecodeManifest(b, rec.Event.Partition)
	if err != nil {
		return fmt.Errorf("manifest of seq %d: %w", rec.Seq, err)
	}
	rec.Event.Entries = es
	return nil
}

// offer classifies, resolves and stages one record; a gap in a full read is
// filled from the partition's subject first. Only a record whose entries are in
// a manifest is classified before it is staged, so that the manifest is read
// only if the record applies; any other is staged at once: Step decides as
// Classify does, and stages nothing when it fails (a gap included), so this
// saves validating and classifying every record twice.
func (r *run) offer(ctx context.Context, m projector.Mode, rec ledger.Record) error {
	manifest := !rec.Event.Manifest.IsZero() && len(rec.Event.Entries) == 0
	first := r.s.core.Step
	if manifest {
		first = r.s.core.Classify
	}
	v, err := first(m, rec)
	var gap *projector.GapError
	if m == projector.Full && errors.As(err, &gap) {
		if err := r.fillGap(ctx, gap); err != nil {
			return err
		}
		v, err = first(m, rec)
	}
	if err != nil {
		return recordError(rec.Seq, err)
	}
	if manifest {
		if v == projector.Apply {
			if err := r.resolve(ctx, &rec); err != nil {
				return err
			}
		}
		if _, err := r.s.core.Step(m, rec); err != nil {
			return recordError(rec.Seq, err)
		}
	}
	r.s.staged(rec)
	r.res.Events++
	if v == projector.Apply {
		r.res.Applied++
	}
	r.pending++
	if r.pending >= r.h.cfg.BatchEvents {
		return r.flush(ctx)
	}
	return nil
}

// recordError is a record refused by the core: a *ledger.RecordError when the
// record itself breaks a rule (format, chain, parts), which an admin may
// quarantine.
func recordError(seq ledger.Seq, err error) error {
	err = fmt.Errorf("seq %d: %w", seq, err)
	var (
		re *ledger.RecordError
		pe *projector.PartsError
	)
	if errors.As(err, &re) {
		return err
	}
	if errors.As(err, &pe) {
		seq = pe.Culprit // a commit's parts that lie: the event that lies
	}
	for _, bad := range []error{ledger.ErrInvalid, ledger.ErrUnknownVersion, projector.ErrGap, projector.ErrDiverged} {
		if errors.Is(err, bad) {
			return &ledger.RecordError{Seq: seq, Err: err, Decoded: true}
		}
	}
	return err
}

// fillGap reads the partition's missing events by subject and stages them scoped.
func (r *run) fillGap(ctx context.Context, gap *projector.GapError) error {
	r.h.log.Info("filling gap", "partition", gap.Partition, "from", gap.From, "to", gap.To)
	err := r.h.logPort().ReadPartition(ctx, gap.Partition, gap.From, func(rec ledger.Record) error {
		if rec.Seq >= gap.Seq {
			return errStop
		}
		return r.offer(ctx, projector.Scoped, rec)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("fill gap of partition %q (seqs %d..%d): %w", gap.Partition, gap.From, gap.To, err)
	}
	return nil
}

func (h *Host) readFull(ctx context.Context, s *session, from, to ledger.Seq, res *SyncResult, progress func(SyncResult)) error {
	r := &run{h: h, s: s, res: res, progress: progress}
	err := h.logPort().Read(ctx, from, to, func(rec ledger.Record) error { return r.offer(ctx, projector.Full, rec) })
	if err == nil {
		err = r.flush(ctx)
	} else if ferr := r.flush(ctx); ferr != nil { // keep what was read before the error
		h.log.Warn("persisting partial sync", "err", ferr)
	}
	return needsRebuild(err)
}

// needsRebuild adds the operator's next step to a truncation error.
func needsRebuild(err error) error {
	if errors.Is(err, ledger.ErrTruncated) {
		return fmt.Errorf("%w; this cache needs a snapshot rebuild", err)
	}
	return err
}

func (h *Host) hydrateAll(ctx context.Context, s *session, res *SyncResult) error {
	var lazy []string
	err := h.rows.ForEachPrefix("", func(p string, e statedb.Entry) (bool, error) {
		if e.Lazy {
			lazy = append(lazy, p)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if len(lazy) == 0 {
		return nil
	}
	if err := s.core.Hydrate(lazy...); err != nil {
		return err
	}
	r := &run{h: h, s: s, res: res}
	return r.flush(ctx)
}

func (h *Host) syncScoped(ctx context.Context, opt SyncOptions) (SyncResult, error) {
	parts := slices.Clone(opt.Partitions)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	// The scoped fast path: one request per partition, all in flight at once (at
	// most scopedRequests), so that it costs about one round trip, not one per
	// partition.
	// A partition whose mark's commit is recorded is checked by identity too
	// (identity.go): the log's commit at the mark.
	lasts := make([]ledger.Seq, len(parts))
	marks := make([]statedb.Commit, len(parts))
	got := make([]string, len(parts))
	for i, p := range parts {
		var err error
		if marks[i], err = h.db.MarkCommit(p); err != nil {
			return SyncResult{}, err
		}
	}
	var g errgroup.Group
	g.SetLimit(scopedRequests)
	for i, p := range parts {
		g.Go(func() (err error) {
			// The partition's last seq and the commit there: a partition
			// at its mark is checked in this one request.
			var tip string
			if lasts[i], tip, err = h.logPort().PartitionTip(ctx, p); err != nil {
				return fmt.Errorf("read last seq of partition %q: %w", p, err)
			}
			switch {
			case !marks[i].Known() || lasts[i] < marks[i].Seq:
			case lasts[i] == marks[i].Seq:
				got[i] = tip
			default: // something to read: the commit at the mark, asked
				got[i], err = h.logPort().CommitAt(ctx, marks[i].Seq)
				if errors.Is(err, ledger.ErrNotFound) {
					return nil // dropped by retention: the read finds the gap
				}
				if err != nil {
					return fmt.Errorf("read the commit at partition %q's mark: %w", p, err)
				}
			}
			return nil
		})
	}
	_, _, _, err := h.checkLineage(ctx)
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return SyncResult{}, err
	}
	res := SyncResult{Scoped: true}
	for i, p := range parts {
		if lasts[i] >= marks[i].Seq {
			continue
		}
		if res.Source == nil {
			// A log read from a mirror may lag this cache's own commits:
			// only the origin's answer below the mark is a rewound log. The
			// origin's head makes the log read at least up to it.
			oh, err := h.logPort().Head(ctx, ledger.HeadRequest{Origin: true})
			if err != nil {
				return res, fmt.Errorf("read the origin's head: %w", err)
			}
			res.Source = &oh
		}
		var tip string
		if lasts[i], tip, err = h.logPort().PartitionTip(ctx, p); err != nil {
			return res, fmt.Errorf("read last seq of partition %q: %w", p, err)
		}
		if lasts[i] == marks[i].Seq {
			got[i] = tip
		}
	}
	var todo []string
	for i, p := range parts {
		last := lasts[i]
		mk, err := h.rows.Mark(p)
		if err != nil {
			return res, err
		}
		res.Head = max(res.Head, last)
		if last < mk.Seq {
			return res, &ForkError{Seq: mk.Seq, Want: marks[i].ID, Head: last, HWM: mk.Seq, Partition: p}
		}
		if marks[i].Known() && got[i] != "" && got[i] != marks[i].ID {
			return res, &ForkError{Seq: mk.Seq, Want: marks[i].ID, Got: got[i], Head: last, HWM: mk.Seq, Partition: p}
		}
		if last != mk.Seq {
			todo = append(todo, p)
		}
	}
	_, hwm, err := h.db.HWM()
	if err != nil {
		return res, err
	}
	if len(todo) == 0 {
		res.UpToDate, res.HWM = true, hwm
		return res, nil
	}
	s, err := h.load(ctx, opt.Lazy)
	if err != nil {
		return res, err
	}
	r := &run{h: h, s: s, res: &res, progress: opt.Progress}
	for _, p := range todo {
		mk, err := s.core.Mark(p)
		if err != nil {
			return res, err
		}
		if err := h.logPort().ReadPartition(ctx, p, mk.Seq+1, func(rec ledger.Record) error {
			return r.offer(ctx, projector.Scoped, rec)
		}); err != nil {
			_ = r.flush(ctx)
			res.HWM = s.core.HWM()
			return res, needsRebuild(fmt.Errorf("sync partition %q: %w", p, err))
		}
	}
	err = r.flush(ctx)
	res.HWM = s.core.HWM()
	return res, err
}

package projector

import (
	"fmt"
	"maps"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// Mode says how the shell read the records it offers.
type Mode uint8

const (
	// Full: the whole stream, in seq order, from HWM+1. Full records may move the HWM.
	Full Mode = iota + 1
	// Scoped: chosen partitions' subjects, each from its mark. Scoped records
	// advance only their partitions' marks and never move the HWM.
	Scoped
	// own: the host's own commit, recorded by RecordOwn.
	own
)

func (m Mode) String() string {
	switch m {
	case Full:
		return "full"
	case Scoped:
		return "scoped"
	case own:
		return "own"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Verdict is what the apply rules decide for an offered record.
type Verdict uint8

const (
	// Skip: rule 1, the event was applied before (seq ≤ its partition's mark).
	Skip Verdict = iota + 1
	// Apply: rule 2, the event extends its partition's chain.
	Apply
)

func (v Verdict) String() string {
	switch v {
	case Skip:
		return "skip"
	case Apply:
		return "apply"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Config configures a Core.
type Config struct {
	// Lazy selects lazy hydration (swamp's metadataOnly): written entries at paths
	// ledger.IsLazySkippable accepts (data/**/raw) are recorded as metadata only
	// (OpLazy) instead of fetched.
	Lazy bool
}

// Core is the projector's pure state machine. It reads the durable state
// through its Storage (the marks and index rows a step needs, never the whole
// index for a step), and holds only the lineage and HWM as of the last
// Advance, the work staged since, and what it has learned from reading (which
// seqs above the HWM have been processed). It does no I/O itself: the shell
// offers it records, takes the work from Ready, makes it durable, persists it
// into the Storage and calls Advance.
//
// A Core is not safe for concurrent use.
type Core struct {
	cfg     Config
	store   Storage               // the durable state: marks and index rows
	lineage string                // durable: as of New or the last Advance
	hwm     ledger.Seq            // durable: as of New or the last Advance
	done    map[ledger.Seq]commit // processed seqs above hwm, durable (volatile knowledge)
	pend    pending               // staged since the last Advance
	out     *Ready                // the outstanding Ready, nil if none
	ids     uint64
}

// commit identifies the part of a commit an event is.
type commit struct {
	id          string
	part, parts int
}

func (c commit) end() bool { return c.part == c.parts }

type pending struct {
	ledger string     // lineage adopted, not yet persisted
	reset  bool       // Restore: marks and files replace the durable state (see Ready.Reset)
	hwm    ledger.Seq // Restore: the restored state's HWM
	marks  map[string]Mark
	files  map[string]fileOp
	done   map[ledger.Seq]commit
}

// fileOp is the staged fate of one path: the last writer within the pending work.
type fileOp struct {
	op   Op
	file *File // nil: no index row
	seq  ledger.Seq
	// earlier: the other versions earlier staged events left at the path (nil:
	// deleted), distinct; see Change.Earlier.
	earlier []*File
}

// withEarlier returns op with prev's version (and those before it) added to its
// earlier versions.
func (op fileOp) withEarlier(prev fileOp) fileOp {
	op.earlier = prev.earlier
	for _, f := range op.earlier {
		if sameVersion(f, prev.file) {
			return op
		}
	}
	op.earlier = append(slices.Clip(op.earlier), prev.file)
	return op
}

// sameVersion reports whether a and b (nil: no file) are the same content.
func sameVersion(a, b *File) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.SameContent(*b)
}

// New returns a Core over the state the shell persisted in s (an empty
// storage for a new host). It reads only the lineage and the HWM; marks and
// index rows are read when a step needs them. Knowledge of processed seqs
// above the HWM starts empty: a restarted host re-reads from HWM+1 and rule 1
// skips what it had applied.
func New(s Storage, cfg Config) (*Core, error) {
	lin, hwm, err := s.HardState()
	if err != nil {
		return nil, fmt.Errorf("new projector: read state: %w", err)
	}
	if lin == "" {
		// A state without a lineage holds nothing: one row or mark tells.
		held := hwm != 0
		if !held {
			err = s.Marks(func(string, Mark) bool { held = true; return false })
		}
		if err == nil && !held {
			err = s.Files("", func(string, File) bool { held = true; return false })
		}
		if err != nil {
			return nil, fmt.Errorf("new projector: read state: %w", err)
		}
		if held {
			return nil, fmt.Errorf("new projector: state without a ledger uuid holds data: %w", ledger.ErrInvalid)
		}
	} else if err := ledger.ValidateUUID(lin); err != nil {
		return nil, fmt.Errorf("new projector: %w", err)
	}
	c := &Core{cfg: cfg, store: s, lineage: lin, hwm: hwm, done: map[ledger.Seq]commit{}}
	c.resetPending()
	return c, nil
}

func (c *Core) resetPending() {
	c.pend = pending{marks: map[string]Mark{}, files: map[string]fileOp{}, done: map[ledger.Seq]commit{}}
}

// State reads the whole durable state through the storage: every mark and
// every index row (tests, in-memory replays; a step never needs it).
func (c *Core) State() (State, error) {
	st, err := ReadState(c.store)
	if err != nil {
		return State{}, err
	}
	st.Ledger, st.HWM = c.lineage, c.hwm
	return st, nil
}

// Lineage returns the durable ledger UUID ("" before one is adopted and advanced).
func (c *Core) Lineage() string { return c.lineage }

// HWM returns the durable high-water mark. A full sync reads from HWM()+1; the
// sync fast path compares the log's last seq with it.
func (c *Core) HWM() ledger.Seq { return c.hwm }

// Mark returns the durable mark of a partition. A scoped sync reads the
// partition's subject from Mark(p).Seq+1; its fast path compares the partition's
// last seq with Mark(p).Seq.
func (c *Core) Mark(partition string) (Mark, error) { return c.mark(partition) }

// File returns the durable index row of path.
func (c *Core) File(path string) (File, bool, error) { return c.file(path) }

// Files calls fn for the durable index rows in path order, until fn returns
// false.
func (c *Core) Files(fn func(path string, f File) bool) error { return c.files("", fn) }

// The staged view: durable state with the pending work on top.

func (c *Core) viewLineage() string {
	if c.pend.ledger != "" {
		return c.pend.ledger
	}
	return c.lineage
}

func (c *Core) viewMark(p string) (Mark, error) {
	if m, ok := c.pend.marks[p]; ok {
		return m, nil
	}
	return c.mark(p)
}

func (c *Core) viewFile(path string) (File, bool, error) {
	if op, ok := c.pend.files[path]; ok {
		if op.file == nil {
			return File{}, false, nil
		}
		return *op.file, true, nil
	}
	return c.file(path)
}

func (c *Core) doneAt(s ledger.Seq) (commit, bool) {
	if p, ok := c.pend.done[s]; ok {
		return p, true
	}
	p, ok := c.done[s]
	return p, ok
}

// busy fails while a Ready is outstanding; verb and args name the call.
func (c *Core) busy(verb string, args ...any) error {
	if c.out != nil {
		return fmt.Errorf("%s: %w (Advance or Discard it first)", fmt.Sprintf(verb, args...), ErrReadyOutstanding)
	}
	return nil
}

// AdoptLineage binds the core to the log described by info: a state without a
// lineage adopts info.UUID (persisted with the next Ready); a state with the same
// UUID is unchanged; another UUID is refused with an error wrapping
// ledger.ErrLineage (I9). Events never set the lineage: only this call does.
func (c *Core) AdoptLineage(info ledger.Info) error {
	if err := c.busy("adopt lineage"); err != nil {
		return err
	}
	if err := ledger.CheckLogFormat(info.Format); err != nil {
		return fmt.Errorf("adopt lineage of %q: %w", info.Name, err)
	}
	if err := ledger.ValidateUUID(info.UUID); err != nil {
		return fmt.Errorf("adopt lineage of %q: %w", info.Name, err)
	}
	switch cur := c.viewLineage(); cur {
	case info.UUID:
		return nil
	case "":
		c.pend.ledger = info.UUID
		return nil
	default:
		return fmt.Errorf("adopt lineage: log %q is ledger %s, this host's state is ledger %s: %w", info.Name, info.UUID, cur, ledger.ErrLineage)
	}
}

// Classify returns what Step would decide for rec, without staging anything. The
// shell uses it to resolve a record's manifest only when the record will be applied.
func (c *Core) Classify(m Mode, rec ledger.Record) (Verdict, error) {
	if m != Full && m != Scoped {
		return 0, fmt.Errorf("classify seq %d: mode %v: %w", rec.Seq, m, ledger.ErrInvalid)
	}
	if rec.Skip != nil {
		return Skip, nil
	}
	return c.classify(m, rec)
}

// Step offers one record read in mode m and stages its effect (docs/design.md §4):
//
//  1. seq ≤ mark[p].Seq: Skip (replay is idempotent);
//  2. modelSeq == mark[p].ModelSeq+1 and prev == mark[p].Seq: Apply;
//  3. otherwise a *GapError (events missing, it says which) or an error wrapping
//     ErrDiverged (the event contradicts the state).
//
// An event of another ledger fails with ledger.ErrLineage, a malformed one
// (Part/Parts, chain fields, entries) with ledger.ErrInvalid. An applied record
// must carry its entries: the shell replaces a manifest by its content (Entries
// set; Manifest may stay set). On error nothing is staged for rec; the work staged
// before stays staged. Full records (applied or skipped) count as processed for
// the HWM; Scoped records never do.
func (c *Core) Step(m Mode, rec ledger.Record) (Verdict, error) {
	if err := c.busy("step seq %d", rec.Seq); err != nil {
		return 0, err
	}
	if m != Full && m != Scoped {
		return 0, fmt.Errorf("step seq %d: mode %v: %w", rec.Seq, m, ledger.ErrInvalid)
	}
	if rec.Skip != nil {
		if err := c.stageSkipped(m, rec); err != nil {
			return 0, err
		}
		return Skip, nil
	}
	v, err := c.check(m, rec)
	if err != nil {
		return 0, err
	}
	if err := c.stage(m, rec, v); err != nil {
		return 0, err
	}
	return v, nil
}

// RecordOwn records the host's own commit after the log's Append returned seqs
// (seqs[i] is the seq of events[i]). events must be the whole commit, parts 1..n
// in order, as CommitEvents built them. The cache already holds the files, so the
// changes are index-only (OpIndex). The marks advance; the commit counts as
// processed, so the HWM moves over it when it starts at HWM+1 (more generally:
// when everything before it is processed). Either the whole commit is staged or,
// on error, nothing.
//
// fences are those the commit was appended with (ledger.Fence): the log
// stored their fence checks in the same atomic batch, at the seqs right after
// the last event's (ledger.FenceCheckSeqs), and each fence's Seq is the fence
// record this host stored when it took the lock (CommitLog.TakeFence's
// answer), before the commit. Neither is an event, and this host knows what
// they hold, so they count as processed with the commit, each a skipped
// record of its own (as a quarantine notice read by a full sync): the HWM
// passes them with the commit — a lock taken between a pull and the push
// (swamp's global lock) does not leave the HWM behind.
func (c *Core) RecordOwn(events []ledger.Event, seqs []ledger.Seq, fences ...ledger.Fence) error {
	if err := c.busy("record own commit"); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("record own commit: "+format+": %w", append(args, ledger.ErrInvalid)...)
	}
	if len(events) == 0 || len(events) != len(seqs) {
		return bad("%d events with %d seqs", len(events), len(seqs))
	}
	if len(events)+len(fences) > ledger.MaxBatch {
		return bad("%d events and %d fences: more than one batch holds", len(events), len(fences))
	}
	for _, f := range fences {
		if f.Seq == 0 || f.Seq >= seqs[0] {
			return bad("fence of lock %q at seq %d, not before the commit's seq %d", f.Lock, f.Seq, seqs[0])
		}
	}
	recs := make([]ledger.Record, len(events))
	verdicts := make([]Verdict, len(events))
	partitions := make(map[string]bool, len(events))
	for i, e := range events {
		switch {
		case e.Commit != events[0].Commit || e.Parts != len(events) || e.Part != i+1:
			return bad("event %d is part %d/%d of commit %s, want part %d/%d of %s", i, e.Part, e.Parts, e.Commit, i+1, len(events), events[0].Commit)
		case i > 0 && seqs[i] <= seqs[i-1]:
			return bad("seqs not increasing: %d after %d", seqs[i], seqs[i-1])
		case partitions[e.Partition]:
			return bad("partition %q twice", e.Partition)
		}
		partitions[e.Partition] = true
		recs[i] = ledger.Record{Seq: seqs[i], Event: e}
		v, err := c.check(own, recs[i])
		if err != nil {
			return fmt.Errorf("record own commit: %w", err)
		}
		verdicts[i] = v
	}
	// The parts touch distinct partitions, so checking each against the staged
	// view before staging any is the same as checking them in turn. Own
	// changes read nothing (target), so staging them cannot fail half-way.
	for i, r := range recs {
		if err := c.stage(own, r, verdicts[i]); err != nil {
			return fmt.Errorf("record own commit: %w", err)
		}
	}
	skipped := ledger.FenceCheckSeqs(seqs, len(fences))
	for _, f := range fences {
		skipped = append(skipped, f.Seq)
	}
	for _, s := range skipped {
		if s > c.hwm {
			c.pend.done[s] = commit{part: 1, parts: 1}
		}
	}
	return nil
}

// Hydrate stages the fetch of lazy paths (OpWrite of the indexed content). Paths
// already materialized are left alone; a path the index does not hold fails with
// ledger.ErrNotFound and nothing is staged.
func (c *Core) Hydrate(paths ...string) error {
	if err := c.busy("hydrate"); err != nil {
		return err
	}
	ops := make(map[string]fileOp, len(paths))
	for _, p := range paths {
		f, ok, err := c.viewFile(p)
		if err != nil {
			return fmt.Errorf("hydrate %q: %w", p, err)
		}
		if !ok {
			return fmt.Errorf("hydrate %q: %w", p, ledger.ErrNotFound)
		}
		if f.Lazy {
			f.Lazy = false
			prev := c.pend.files[p]
			ops[p] = fileOp{op: OpWrite, file: &f, seq: prev.seq, earlier: prev.earlier}
		}
	}
	maps.Copy(c.pend.files, ops)
	return nil
}

// check runs the validity checks and the apply rules for rec; it changes nothing.
func (c *Core) check(m Mode, rec ledger.Record) (Verdict, error) {
	v, err := c.classify(m, rec)
	if err == nil && v == Apply && len(rec.Event.Entries) == 0 {
		err = fmt.Errorf("apply seq %d: entries not resolved (manifest %s): %w", rec.Seq, rec.Event.Manifest, ledger.ErrInvalid)
	}
	return v, err
}

func (c *Core) classify(m Mode, rec ledger.Record) (Verdict, error) {
	s, e := rec.Seq, &rec.Event
	fail := func(err error) (Verdict, error) { return 0, fmt.Errorf("offer %v seq %d: %w", m, s, err) }
	if err := validate(rec); err != nil {
		return fail(err)
	}
	switch lin := c.viewLineage(); {
	case lin == "":
		return fail(fmt.Errorf("no ledger adopted yet (AdoptLineage with the log's Info first): %w", ledger.ErrLineage))
	case e.Ledger != lin:
		return fail(fmt.Errorf("event of ledger %s, state is ledger %s: %w", e.Ledger, lin, ledger.ErrLineage))
	}
	if err := c.checkParts(s, e); err != nil {
		return fail(err)
	}
	mk, err := c.viewMark(e.Partition)
	if err != nil {
		return fail(err)
	}
	diverged := func(why string) (Verdict, error) {
		return fail(fmt.Errorf("partition %q: event is modelSeq %d (prev %d) but mark is modelSeq %d at seq %d%s: %w",
			e.Partition, e.ModelSeq, e.Prev, mk.ModelSeq, mk.Seq, why, ErrDiverged))
	}
	switch {
	case s <= mk.Seq: // rule 1
		if s == mk.Seq && e.ModelSeq != mk.ModelSeq || s < mk.Seq && e.ModelSeq >= mk.ModelSeq {
			return diverged("")
		}
		return Skip, nil
	case s <= c.hwm:
		// I2: every seq ≤ HWM is applied, so its partition's mark covers it.
		return diverged(fmt.Sprintf(", and seq %d is below the HWM %d", s, c.hwm))
	case e.ModelSeq == mk.ModelSeq+1 && e.Prev == mk.Seq: // rule 2
		return Apply, nil
	}
	if b := rec.Bridge; b != nil {
		// e follows quarantined events of its partition, links every reader
		// skips: rules 2 and 3 hold for the event before them.
		switch {
		case b.ModelSeq == mk.ModelSeq && b.Prev == mk.Seq: // rule 2
			return Apply, nil
		case b.ModelSeq > mk.ModelSeq && b.Prev > mk.Seq: // rule 3
			return 0, &GapError{Partition: e.Partition, Mark: mk, Seq: s, ModelSeq: e.ModelSeq, From: mk.Seq + 1, To: b.Prev}
		}
		return diverged(fmt.Sprintf(", through quarantined seqs to modelSeq %d at seq %d", b.ModelSeq, b.Prev))
	}
	switch {
	case e.ModelSeq > mk.ModelSeq+1 && e.Prev > mk.Seq: // rule 3
		return 0, &GapError{Partition: e.Partition, Mark: mk, Seq: s, ModelSeq: e.ModelSeq, From: mk.Seq + 1, To: e.Prev}
	default:
		return diverged("")
	}
}

// validate checks one record on its own, reusing the codec's event checks. A
// resolved event carries its entries and may keep its manifest digest.
func validate(rec ledger.Record) error {
	e := rec.Event
	if !e.Manifest.IsZero() && len(e.Entries) > 0 {
		e.Manifest = ledger.Digest{}
	}
	if err := ledger.ValidateEvent(e); err != nil {
		return err
	}
	if rec.Seq == 0 || e.Prev >= rec.Seq {
		return fmt.Errorf("prev %d not below seq %d: %w", e.Prev, rec.Seq, ledger.ErrInvalid)
	}
	if b := rec.Bridge; b != nil && (b.Prev >= e.Prev || b.ModelSeq >= e.ModelSeq-1) {
		return fmt.Errorf("bridge to modelSeq %d at seq %d does not lie behind prev %d (modelSeq %d): %w", b.ModelSeq, b.Prev, e.Prev, e.ModelSeq, ledger.ErrInvalid)
	}
	return nil
}

// checkParts checks rec's Part/Parts against the neighbouring seqs processed so
// far: a commit's parts occupy consecutive seqs (one atomic batch), so the seq
// before part j > 1 is part j-1 of the same commit and the seq after a commit's
// last part starts a new commit. The HWM is a commit end, so HWM+1 is a part 1.
func (c *Core) checkParts(s ledger.Seq, e *ledger.Event) error {
	if s <= c.hwm {
		return nil
	}
	me := commit{e.Commit, e.Part, e.Parts}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("part %d/%d of commit %s: "+format+": %w", append([]any{e.Part, e.Parts, e.Commit}, append(args, ledger.ErrInvalid)...)...)
	}
	if got, ok := c.doneAt(s); ok && got != me {
		return bad("seq %d was read as part %d/%d of commit %s", s, got.part, got.parts, got.id)
	}
	// A misfit names its culprit (PartsError): the neighbour whose commit
	// claims parts that never came when this record starts a commit, else this one.
	if s-1 == c.hwm {
		if e.Part != 1 {
			return &PartsError{Seq: s, Culprit: s, Err: bad("seq %d follows the HWM, a commit end", s)}
		}
	} else if prev, ok := c.doneAt(s - 1); ok && !follows(prev, me) {
		culprit := s
		if me.part == 1 {
			culprit = s - 1
		}
		return &PartsError{Seq: s, Culprit: culprit, Err: bad("seq %d before it is part %d/%d of commit %s", s-1, prev.part, prev.parts, prev.id)}
	}
	if next, ok := c.doneAt(s + 1); ok && !follows(me, next) {
		culprit := s
		if next.part != 1 {
			culprit = s + 1
		}
		return &PartsError{Seq: s, Culprit: culprit, Err: bad("seq %d after it is part %d/%d of commit %s", s+1, next.part, next.parts, next.id)}
	}
	return nil
}

// follows reports whether b may sit at the seq right after a: the log's
// contiguity rule, ledger.Follows.
func follows(a, b commit) bool {
	return ledger.Follows(ledger.PartOf{Commit: a.id, Part: a.part, Parts: a.parts}, ledger.PartOf{Commit: b.id, Part: b.part, Parts: b.parts})
}

// stage records the effect of a checked record in the pending work; on error
// (a storage read) nothing is staged.
func (c *Core) stage(m Mode, rec ledger.Record, v Verdict) error {
	e := &rec.Event
	var ops []fileOp
	if v == Apply {
		ops = make([]fileOp, len(e.Entries))
		for i, en := range e.Entries {
			op, err := c.target(m, rec.Seq, en)
			if err != nil {
				return fmt.Errorf("apply seq %d: %w", rec.Seq, err)
			}
			ops[i] = op
		}
	}
	if m != Scoped && rec.Seq > c.hwm {
		c.pend.done[rec.Seq] = commit{e.Commit, e.Part, e.Parts}
	}
	if v != Apply {
		return nil
	}
	for i, en := range e.Entries {
		op := ops[i]
		if prev, ok := c.pend.files[en.Path]; ok {
			op = op.withEarlier(prev)
		}
		c.pend.files[en.Path] = op
	}
	c.pend.marks[e.Partition] = Mark{ModelSeq: e.ModelSeq, Seq: rec.Seq}
	return nil
}

// stageSkipped stages a record no reader applies (ledger.Skip): a quarantined
// message or a quarantine notice. It applies nothing, is part of no chain (the
// partition's next event names its previous event as prev; ledger/natsjs's
// Append sees past quarantined messages), and counts as processed in a full
// read — a commit of its own — so the HWM passes it. A message this host
// applied before it was quarantined is ErrAppliedQuarantined.
func (c *Core) stageSkipped(m Mode, rec ledger.Record) error {
	if p := rec.Skip.Partition; p != "" {
		mk, err := c.viewMark(p)
		if err != nil {
			return fmt.Errorf("offer %v seq %d: %w", m, rec.Seq, err)
		}
		if mk.Seq == rec.Seq {
			return fmt.Errorf("offer %v seq %d: partition %q: quarantined seq %d was %w", m, rec.Seq, p, rec.Seq, ErrAppliedQuarantined)
		}
	}
	if m != Scoped && rec.Seq > c.hwm {
		c.pend.done[rec.Seq] = commit{part: 1, parts: 1}
	}
	return nil
}

// target decides what applying en means for the cache and the index. Only a
// lazy entry reads the index (the row it may keep materialized).
func (c *Core) target(m Mode, s ledger.Seq, en ledger.Entry) (fileOp, error) {
	switch {
	case m == own && en.Deleted:
		return fileOp{op: OpIndex, seq: s}, nil
	case en.Deleted:
		return fileOp{op: OpDelete, seq: s}, nil
	}
	f := File{SHA256: en.SHA256, Size: en.Size, Mode: en.Mode}
	switch {
	case m == own:
		return fileOp{op: OpIndex, file: &f, seq: s}, nil
	case c.cfg.Lazy && ledger.IsLazySkippable(en.Path):
		cur, ok, err := c.viewFile(en.Path)
		if err != nil {
			return fileOp{}, err
		}
		if ok && !cur.Lazy && cur.SameContent(f) {
			break // materialized with this very content: keep it so
		}
		f.Lazy = true
		return fileOp{op: OpLazy, file: &f, seq: s}, nil
	}
	return fileOp{op: OpWrite, file: &f, seq: s}, nil
}

// pendingHWM is the HWM the pending work reaches once durable.
func (c *Core) pendingHWM() ledger.Seq {
	if len(c.pend.done) == 0 {
		return c.hwm // the durable knowledge is folded in already
	}
	ds := make([]Done, 0, len(c.done)+len(c.pend.done))
	for _, m := range []map[ledger.Seq]commit{c.done, c.pend.done} {
		for s, p := range m {
			ds = append(ds, Done{Seq: s, CommitEnd: p.end()})
		}
	}
	return SafeHWM(c.hwm, ds)
}

// HasReady reports whether work is staged (Ready would describe something to do
// or to persist).
func (c *Core) HasReady() bool {
	p := &c.pend
	return p.ledger != "" || p.reset || len(p.marks) > 0 || len(p.files) > 0 || len(p.done) > 0
}

// Ready returns the staged work, and marks it outstanding: until Advance or
// Discard, Step, RecordOwn, Hydrate and AdoptLineage fail with ErrReadyOutstanding. Calling
// Ready again before that returns the same work. It reads the index rows of
// the staged paths (each Change's Old) and what the directory-wins rule needs
// around them; if a read fails, nothing becomes outstanding and the staged
// work stays staged.
func (c *Core) Ready() (Ready, error) {
	if c.out == nil {
		rd := Ready{Ledger: c.pend.ledger, HWM: c.pendingHWM()}
		if c.pend.reset {
			rd.Reset, rd.Ledger, rd.HWM = true, c.viewLineage(), c.pend.hwm
		}
		if len(c.pend.marks) > 0 {
			rd.Marks = maps.Clone(c.pend.marks)
		}
		for _, p := range slices.Sorted(maps.Keys(c.pend.files)) {
			op := c.pend.files[p]
			ch := Change{Path: p, Op: op.op, Seq: op.seq}
			old, ok, err := c.file(p)
			if err != nil {
				return Ready{}, err
			}
			if ok {
				ch.Old = &old
			}
			if op.file != nil {
				f := *op.file
				ch.New = &f
			}
			ch.Earlier = cloneFiles(op.earlier)
			rd.Changes = append(rd.Changes, ch)
		}
		var err error
		if rd.Changes, err = c.shadowChanges(rd.Changes); err != nil {
			return Ready{}, err
		}
		c.ids++
		rd.id = c.ids
		c.out = &rd
	}
	return c.out.clone(), nil
}

// Advance tells the core that rd's work is durable: the files are in the cache
// and the index rows, marks, HWM and lineage are persisted (atomically) into
// the core's Storage, whose reads now give rd's state. The core's lineage and
// HWM become rd's. rd must be the outstanding Ready: advancing another (a
// foreign, stale or discarded one, or the same one twice) is a bug of the
// shell, and Advance panics, as it does for an HWM that would go down.
func (c *Core) Advance(rd Ready) {
	if c.out == nil || rd.id != c.out.id {
		panic("projector: Advance of a Ready that is not the outstanding one")
	}
	out := c.out
	if out.HWM < c.hwm && !out.Reset {
		panic(fmt.Sprintf("projector: HWM would decrease from %d to %d", c.hwm, out.HWM))
	}
	if out.Reset { // nothing above the new HWM is known
		clear(c.done)
	}
	if out.Ledger != "" {
		c.lineage = out.Ledger
	}
	c.hwm = out.HWM
	maps.Copy(c.done, c.pend.done)
	maps.DeleteFunc(c.done, func(s ledger.Seq, _ commit) bool { return s <= c.hwm })
	c.resetPending()
	c.out = nil
}

// Discard drops the staged work and the outstanding Ready: the shell could not
// make it durable. The durable state is unchanged; the records must be offered
// again (read again from HWM+1 or from the marks).
func (c *Core) Discard() {
	c.resetPending()
	c.out = nil
}

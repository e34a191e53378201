package projector

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

var (
	simRuns  = flag.Int("sim.runs", 12, "simulations per test (one when -seed is set)")
	simSteps = flag.Int("sim.steps", 400, "steps per simulation")
)

// simConfig shapes one simulation.
type simConfig struct {
	seed       uint64
	steps      int
	partitions int
	hosts      int
	// swampArm makes the simulated shell do what swamp did (#3193): after a
	// scoped sync it persists the log's head as its HWM.
	swampArm bool
}

type sim struct {
	cfg   simConfig
	r     *rand.Rand
	log   *memLog
	hosts []*simHost
	step  int
	trace []string
	stats map[string]int // how often each situation arose
}

type simHost struct {
	name  string
	cfg   Config
	core  *Core
	disk  State                    // what the shell persisted
	cache map[string]ledger.Digest // the cache's files
	seen  State                    // disk at the last check (I3)
}

// errCrash ends a sync: the host crashed (or its shell gave up) mid-way.
var errCrash = errors.New("crash")

func newSim(cfg simConfig) *sim {
	s := &sim{cfg: cfg, r: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5deece66d)), log: newMemLog(testLedger), stats: map[string]int{}}
	for i := range cfg.hosts {
		h := &simHost{name: fmt.Sprintf("h%d", i), cfg: Config{Lazy: i%2 == 1}, disk: State{}.Clone(), cache: map[string]ledger.Digest{}}
		h.core, _ = New(h.disk, h.cfg)
		h.seen = h.disk.Clone()
		s.hosts = append(s.hosts, h)
	}
	return s
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%4d ", s.step)+fmt.Sprintf(format, args...))
	if len(s.trace) > 25 {
		s.trace = s.trace[1:]
	}
}

func (s *sim) fail(err error) error {
	return fmt.Errorf("seed %d step %d: %w\nlast actions:\n  %s", s.cfg.seed, s.step, err, strings.Join(s.trace, "\n  "))
}

// run plays the simulation, checks the invariants after every step, and ends
// with a full sync on every host and the convergence check.
func (s *sim) run() error {
	for s.step = 1; s.step <= s.cfg.steps; s.step++ {
		h := s.hosts[s.r.IntN(len(s.hosts))]
		var err error
		switch x := s.r.IntN(100); {
		case x < 30:
			err = s.remoteCommit()
		case x < 55:
			err = s.fullSync(h, true)
		case x < 72:
			err = s.scopedSync(h, s.randomPartitions(), true)
		case x < 90:
			err = s.ownCommit(h)
		case x < 95:
			err = s.gapProbe(h)
		default:
			err = s.hydrate(h)
		}
		if err != nil && !errors.Is(err, errCrash) {
			return s.fail(err)
		}
		if err := s.check(); err != nil {
			return s.fail(err)
		}
	}
	s.step = 0
	s.logf("final full syncs")
	for _, h := range s.hosts {
		if err := s.fullSync(h, false); err != nil {
			return s.fail(err)
		}
	}
	if err := s.check(); err != nil {
		return s.fail(err)
	}
	return s.converged()
}

func (s *sim) partition(i int) string { return fmt.Sprintf("data--sim--p%d", i) }

func (s *sim) randomPartitions() []string {
	var ps []string
	for _, i := range s.r.Perm(s.cfg.partitions)[:1+s.r.IntN(min(3, s.cfg.partitions))] {
		ps = append(ps, s.partition(i))
	}
	return ps
}

// changes draws a change set: some files of some partitions written with new
// content or deleted, as seen by have (the writer's view of the files).
func (s *sim) changes(have func(path string) bool) []ledger.Entry {
	var es []ledger.Entry
	for _, p := range s.randomPartitions() {
		i := strings.TrimPrefix(p, "data--sim--p")
		for _, j := range s.r.Perm(2)[:1+s.r.IntN(2)] {
			path := fmt.Sprintf("data/sim/p%s/f%d/1/raw", i, j)
			if s.r.IntN(3) == 0 {
				path = fmt.Sprintf("data/sim/p%s/f%d/1/metadata.yaml", i, j)
			}
			if have(path) && s.r.IntN(4) == 0 {
				es = append(es, del(path))
			} else {
				// Few contents per path: files return to earlier contents.
				es = append(es, s.log.write(path, fmt.Sprintf("%s@%d", path, s.r.IntN(3))))
			}
		}
	}
	return es
}

func (s *sim) remoteCommit() error {
	head := map[string]bool{}
	for p := range s.log.heads {
		for path := range s.log.filesAt(p, 0) {
			head[path] = true
		}
	}
	seqs, err := s.log.commitRemote("writer", s.changes(func(p string) bool { return head[p] }))
	s.logf("writer commits seqs %v", seqs)
	return err
}

// offer steps recs in random batches; after each batch the Ready is finished
// one of four ways (see finish).
func (s *sim) offer(h *simHost, m Mode, recs []ledger.Record, crashes bool) error {
	for len(recs) > 0 {
		n := min(len(recs), 1+s.r.IntN(4))
		for _, r := range recs[:n] {
			if _, err := h.core.Step(m, r); err != nil {
				return fmt.Errorf("%s: %v sync: %w", h.name, m, err)
			}
		}
		recs = recs[n:]
		if err := s.finish(h, crashes); err != nil {
			return err
		}
	}
	return nil
}

// finish takes the Ready and, at random (when crashes): persists it and
// advances; crashes before the transaction (after writing some of the files);
// crashes after the transaction, before Advance; or discards it.
func (s *sim) finish(h *simHost, crashes bool) error {
	rd := h.core.Ready()
	x := 0
	if crashes {
		x = s.r.IntN(100)
	}
	switch {
	case x < 75:
		s.stats["ready advanced"]++
		if err := s.persist(h, rd, len(rd.Changes)); err != nil {
			return err
		}
		return h.core.Advance(rd)
	case x < 85:
		s.stats["crash before persisting"]++
		s.logf("%s crashes before persisting a Ready of %d changes", h.name, len(rd.Changes))
		if err := s.writeFiles(h, rd, s.r.IntN(len(rd.Changes)+1)); err != nil {
			return err
		}
		return s.restart(h)
	case x < 93:
		s.stats["crash after persisting"]++
		s.logf("%s crashes after persisting, before Advance", h.name)
		if err := s.persist(h, rd, len(rd.Changes)); err != nil {
			return err
		}
		return s.restart(h)
	default:
		s.stats["ready discarded"]++
		s.logf("%s discards a Ready", h.name)
		if err := s.writeFiles(h, rd, s.r.IntN(len(rd.Changes)+1)); err != nil {
			return err
		}
		h.core.Discard()
		return errCrash
	}
}

func (s *sim) restart(h *simHost) error {
	c, err := New(h.disk, h.cfg)
	if err != nil {
		return fmt.Errorf("%s: restart: %w", h.name, err)
	}
	h.core = c
	return errCrash
}

// writeFiles does the cache side of the first n changes of rd, as a shell does.
func (s *sim) writeFiles(h *simHost, rd Ready, n int) error {
	for _, ch := range rd.Changes[:n] {
		switch ch.Op {
		case OpWrite:
			content, ok := s.log.blobs[ch.New.SHA256]
			if !ok || ledger.DigestOf([]byte(content)) != ch.New.SHA256 { // I5
				return fmt.Errorf("%s: blob %s for %s missing or wrong", h.name, ch.New.SHA256, ch.Path)
			}
			h.cache[ch.Path] = ch.New.SHA256
		case OpLazy, OpDelete:
			delete(h.cache, ch.Path)
		case OpIndex:
			d, ok := h.cache[ch.Path]
			if ch.New == nil && ok || ch.New != nil && d != ch.New.SHA256 {
				return fmt.Errorf("%s: own change %s not in the cache", h.name, ch.Path)
			}
		}
	}
	return nil
}

// persist writes the files, then the state in one transaction.
func (s *sim) persist(h *simHost, rd Ready, n int) error {
	if err := s.writeFiles(h, rd, n); err != nil {
		return err
	}
	persist(&h.disk, rd)
	return nil
}

// fullSync reads the log from the HWM+1 to the head, or (when crashes) to a
// random cut that may split a commit: a reader sees an atomic batch's first
// messages before its last.
func (s *sim) fullSync(h *simHost, crashes bool) error {
	if err := h.core.AdoptLineage(s.log.info); err != nil {
		return err
	}
	from, to := h.core.HWM()+1, s.log.head()
	if crashes && to >= from && s.r.IntN(3) == 0 {
		to = from - 1 + ledger.Seq(s.r.IntN(int(to-from)+2))
	}
	s.logf("%s full sync %d..%d", h.name, from, to)
	s.stats["full sync"]++
	if to >= from && !s.log.rec(to).LastOfCommit() {
		s.stats["full sync read ending inside a commit"]++
	}
	recs := s.log.read(from, to)
	if len(recs) == 0 {
		if h.core.HasReady() { // the lineage
			return s.finish(h, crashes)
		}
		return nil
	}
	return s.offer(h, Full, recs, crashes)
}

func (s *sim) scopedSync(h *simHost, parts []string, crashes bool) error {
	if err := h.core.AdoptLineage(s.log.info); err != nil {
		return err
	}
	var recs []ledger.Record
	for _, p := range parts {
		recs = append(recs, s.log.readPartition(p, h.core.Mark(p).Seq+1, 0)...)
	}
	s.logf("%s scoped sync %v: %d records", h.name, parts, len(recs))
	s.stats["scoped sync"]++
	var err error
	switch {
	case len(recs) > 0:
		err = s.offer(h, Scoped, recs, crashes)
	case h.core.HasReady():
		err = s.finish(h, crashes)
	}
	if err != nil {
		return err
	}
	if s.cfg.swampArm {
		h.disk.HWM = s.log.head() // swamp's no-op push arming the remote counter
		s.logf("%s arms HWM %d after a scoped sync (swamp)", h.name, h.disk.HWM)
		return s.restart(h)
	}
	return nil
}

// ownCommit commits local changes: build, append, and on a chain conflict sync
// the touched partitions (scoped) and retry once.
func (s *sim) ownCommit(h *simHost) error {
	if err := h.core.AdoptLineage(s.log.info); err != nil {
		return err
	}
	if h.core.HasReady() { // a lineage to persist first
		if err := s.finish(h, false); err != nil {
			return err
		}
	}
	entries := s.changes(func(p string) bool { _, ok := h.core.File(p); return ok })
	for attempt := 0; ; attempt++ {
		evs, err := h.core.CommitEvents(s.log.newCommit(h.name, entries))
		if err != nil {
			return err
		}
		seqs, err := s.log.append(evs)
		var conflict *ledger.ConflictError
		if errors.As(err, &conflict) && attempt == 0 {
			// Sync the touched partitions; retry unless a changed path was
			// also changed remotely (DESIGN §4).
			var parts []string
			var remote []ledger.Record
			for _, e := range evs {
				parts = append(parts, e.Partition)
				remote = append(remote, s.log.readPartition(e.Partition, h.core.Mark(e.Partition).Seq+1, 0)...)
			}
			s.stats["own commit: chain conflict"]++
			s.logf("%s commit conflicts on %s: scoped sync", h.name, conflict.Partition)
			if err := s.scopedSync(h, parts, false); err != nil {
				return err
			}
			if paths := Conflicts(entries, remote); len(paths) > 0 {
				s.stats["own commit: paths changed remotely"]++
				s.logf("%s: %v changed remotely too: conflict, nothing committed", h.name, paths)
				return nil
			}
			continue
		}
		if errors.As(err, &conflict) {
			s.logf("%s commit conflicts again: gives up", h.name)
			return nil
		}
		if err != nil {
			return err
		}
		s.logf("%s commits seqs %v", h.name, seqs)
		s.stats["own commit"]++
		if seqs[0] == h.core.HWM()+1 {
			s.stats["own commit at HWM+1"]++
		}
		for _, en := range entries { // the local files the commit published
			if en.Deleted {
				delete(h.cache, en.Path)
			} else {
				h.cache[en.Path] = en.SHA256
			}
		}
		if s.r.IntN(8) == 0 {
			s.logf("%s crashes before recording its commit", h.name)
			return s.restart(h)
		}
		if err := h.core.RecordOwn(evs, seqs); err != nil {
			return fmt.Errorf("%s: record own: %w", h.name, err)
		}
		return s.finish(h, true)
	}
}

// gapProbe offers a partition's second unapplied event, skipping the first:
// the core must report the gap exactly and stage nothing.
func (s *sim) gapProbe(h *simHost) error {
	p := s.partition(s.r.IntN(s.cfg.partitions))
	m := h.core.Mark(p)
	recs := s.log.readPartition(p, m.Seq+1, 0)
	if len(recs) < 2 || h.core.Lineage() == "" {
		return nil
	}
	s.logf("%s gap probe on %s at seq %d", h.name, p, recs[1].Seq)
	s.stats["gap probe"]++
	_, err := h.core.Step(Scoped, recs[1])
	want := &GapError{Partition: p, Mark: m, Seq: recs[1].Seq, ModelSeq: recs[1].Event.ModelSeq, From: m.Seq + 1, To: recs[0].Seq}
	var gap *GapError
	if !errors.As(err, &gap) || *gap != *want {
		return fmt.Errorf("%s: gap probe: got %v, want %v", h.name, err, want)
	}
	if h.core.HasReady() {
		return fmt.Errorf("%s: gap probe staged work", h.name)
	}
	return nil
}

func (s *sim) hydrate(h *simHost) error {
	var lazy []string
	for p, f := range h.core.Files() {
		if f.Lazy {
			lazy = append(lazy, p)
		}
	}
	if len(lazy) == 0 {
		return nil
	}
	p := lazy[s.r.IntN(len(lazy))]
	s.logf("%s hydrates %s", h.name, p)
	s.stats["hydrate"]++
	if err := h.core.Hydrate(p); err != nil {
		return err
	}
	return s.finish(h, true)
}

// check verifies the invariants on every host's persisted state.
func (s *sim) check() error {
	for _, h := range s.hosts {
		if err := s.checkHost(h); err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		h.seen = h.disk.Clone()
	}
	return nil
}

func (s *sim) checkHost(h *simHost) error {
	d := h.disk
	if !equalState(h.core.State(), d) {
		return errors.New("the core's durable state differs from the persisted state")
	}
	// I3 monotone.
	if d.HWM < h.seen.HWM {
		return fmt.Errorf("I3: HWM went down from %d to %d", h.seen.HWM, d.HWM)
	}
	for p, m := range h.seen.Marks {
		if n := d.Marks[p]; n.ModelSeq < m.ModelSeq || n.Seq < m.Seq {
			return fmt.Errorf("I3: mark of %s went down from %v to %v", p, m, n)
		}
	}
	// I2 safety: every seq ≤ HWM is applied, and the HWM is a commit end.
	if d.HWM > s.log.head() {
		return fmt.Errorf("I2: HWM %d beyond the log's head %d", d.HWM, s.log.head())
	}
	for _, r := range s.log.recs[:d.HWM] {
		if m := d.Marks[r.Event.Partition]; m.Seq < r.Seq {
			return fmt.Errorf("I2: HWM %d but seq %d (%s modelSeq %d) is not applied: mark %v", d.HWM, r.Seq, r.Event.Partition, r.Event.ModelSeq, m)
		}
	}
	if d.HWM > 0 && !s.log.rec(d.HWM).LastOfCommit() {
		return fmt.Errorf("I2: HWM %d is not a commit end", d.HWM)
	}
	// I1 chain: each mark is a real chain position, and the partition's index
	// rows are exactly the fold of its events 1..modelSeq.
	byPart := map[string]map[string]File{}
	for path, f := range d.Files {
		p := ledger.PartitionKey(path)
		if byPart[p] == nil {
			byPart[p] = map[string]File{}
		}
		byPart[p][path] = f
	}
	for p := range byPart {
		if _, ok := d.Marks[p]; !ok {
			return fmt.Errorf("I1: index rows of %s without a mark", p)
		}
	}
	for p, m := range d.Marks {
		if m.Seq > s.log.head() {
			return fmt.Errorf("I1: mark of %s beyond the head", p)
		}
		if r := s.log.rec(m.Seq); r.Event.Partition != p || r.Event.ModelSeq != m.ModelSeq {
			return fmt.Errorf("I1: mark %v of %s is not its chain's position (seq %d is %s modelSeq %d)", m, p, m.Seq, r.Event.Partition, r.Event.ModelSeq)
		}
		want := s.log.filesAt(p, m.Seq)
		got := byPart[p]
		if len(got) != len(want) {
			return fmt.Errorf("I1: %s at %v: index has %d files, the chain %d", p, m, len(got), len(want))
		}
		for path, en := range want {
			if f, ok := got[path]; !ok || f.SHA256 != en.SHA256 || f.Size != en.Size || f.Mode != en.Mode {
				return fmt.Errorf("I1: %s at %v: index row %s is %+v, the chain says %+v", p, m, path, f, en)
			}
		}
	}
	return nil
}

// converged checks I8 after the final full syncs: every host at the head, with
// the ledger's files, and a cache that holds them (lazy ones may be absent).
func (s *sim) converged() error {
	head := s.log.head()
	want := map[string]ledger.Entry{}
	for p := range s.log.heads {
		maps.Copy(want, s.log.filesAt(p, head))
	}
	for _, h := range s.hosts {
		fail := func(format string, args ...any) error {
			return s.fail(fmt.Errorf("I8: %s: "+format, append([]any{h.name}, args...)...))
		}
		if h.disk.HWM != head {
			return fail("HWM %d, head %d", h.disk.HWM, head)
		}
		if !maps.Equal(h.disk.Marks, s.log.heads) {
			return fail("marks %v, log heads %v", h.disk.Marks, s.log.heads)
		}
		if len(h.disk.Files) != len(want) {
			return fail("%d files, ledger %d", len(h.disk.Files), len(want))
		}
		for path, en := range want {
			f, ok := h.disk.Files[path]
			if !ok || f.SHA256 != en.SHA256 || f.Size != en.Size || f.Mode != en.Mode {
				return fail("%s is %+v, ledger %+v", path, f, en)
			}
			d, cached := h.cache[path]
			if f.Lazy && cached && d != f.SHA256 || !f.Lazy && d != f.SHA256 {
				return fail("cache %s holds %v (cached %v), index %+v", path, d, cached, f)
			}
		}
		for path := range h.cache {
			if _, ok := want[path]; !ok {
				return fail("cache holds %s, which the ledger does not", path)
			}
		}
	}
	return nil
}

func simSeeds(t *testing.T) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	base := testSeed(t)
	seeds := make([]uint64, *simRuns)
	for i := range seeds {
		seeds[i] = base + uint64(i)
	}
	return seeds
}

func TestSimulation(t *testing.T) {
	total := map[string]int{}
	for _, seed := range simSeeds(t) {
		cfg := simConfig{seed: seed, steps: *simSteps, partitions: 4, hosts: 3}
		s := newSim(cfg)
		if err := s.run(); err != nil {
			t.Fatalf("%v\nreplay: go test ./projector -run TestSimulation -seed %d", err, seed)
		}
		for k, n := range s.stats {
			total[k] += n
		}
	}
	t.Logf("situations: %v", total)
	if *seedFlag == 0 {
		// The runs must exercise every situation the simulator can produce.
		for _, k := range []string{
			"ready advanced", "crash before persisting", "crash after persisting", "ready discarded",
			"full sync", "full sync read ending inside a commit", "scoped sync",
			"own commit", "own commit at HWM+1", "own commit: chain conflict", "gap probe", "hydrate",
		} {
			if total[k] == 0 {
				t.Errorf("no %q in %d runs", k, *simRuns)
			}
		}
	}
}

// TestSimulationCatchesSwampArm runs the simulation with swamp's #3193 shell,
// which persists the log's head as its HWM after a scoped sync: the checker
// must catch it as an I2 violation in every run.
func TestSimulationCatchesSwampArm(t *testing.T) {
	seeds := simSeeds(t)
	for _, seed := range seeds[:min(5, len(seeds))] {
		cfg := simConfig{seed: seed, steps: *simSteps, partitions: 4, hosts: 3, swampArm: true}
		err := newSim(cfg).run()
		if err == nil {
			t.Fatalf("seed %d: the checker did not catch the HWM armed after a scoped sync", seed)
		}
		if !strings.Contains(err.Error(), "I2:") {
			t.Fatalf("seed %d: caught as something other than I2: %v", seed, err)
		}
		t.Logf("caught: %s", strings.SplitN(err.Error(), "\n", 2)[0])
	}
}

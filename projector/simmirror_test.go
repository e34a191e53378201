package projector

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// A mirror in the simulator (simConfig.mirror, issue 40): the hosts of odd
// index are in region B and read the ledger through a mirror of the
// origin's log, as natsjs.Log does with a Read endpoint; they write to the
// origin. The mirror holds a prefix of the origin's seqs, copied message by
// message — so it may end inside a commit: the server drops the batch
// headers when mirroring, and only the ledger's own commit grouping
// (Part/Parts) tells a reader where a commit ends —; it lags, stalls and
// resumes; what retention purged at the origin before the mirror copied it
// is a skip in the mirror (unknown there, never "deleted": asked of the
// origin, which says it is gone); and the link between the regions is cut
// (the origin out of reach from region B: reads go on from the mirror,
// writes are refused, and what the mirror lacks cannot be read).
//
// A region-B host's log knows, per process, a floor: the seqs the origin is
// known to hold (its own appends, the origin heads it asked for); it never
// reads below it, waiting for the mirror or reading the rest from the
// origin. A plain sync goes by the mirror's word (and says so); the mirror
// below the HWM is asked of the origin before anything is called rewound. A
// locked sync — a swamp command holding a model's lock — asks the origin for
// its head first (one request no mirror answers) and reads up to it.
//
// I11: a locked sync never answers "nothing new" for the locked model while
// the origin holds a newer event of it, and reads up to the origin's last.
type simMirror struct {
	regionB map[string]bool
	last    ledger.Seq          // the mirror holds the origin's seqs up to here…
	skipped map[ledger.Seq]bool // …except these (purged at the origin before copied)
	stalled bool                // copies nothing
	cut     bool                // the link between the regions is down: the origin is out of reach from region B
	floor   map[string]ledger.Seq
}

func newSimMirror(hosts []*simHost) *simMirror {
	m := &simMirror{regionB: map[string]bool{}, skipped: map[ledger.Seq]bool{}, floor: map[string]ledger.Seq{}}
	for i, h := range hosts {
		if i%2 == 1 {
			m.regionB[h.name] = true
		}
	}
	return m
}

// viaMirror reports whether h reads through the mirror.
func (s *sim) viaMirror(h *simHost) bool { return s.m != nil && s.m.regionB[h.name] }

// raise records that h's log knows the origin holds seq.
func (m *simMirror) raise(h *simHost, seq ledger.Seq) {
	m.floor[h.name] = max(m.floor[h.name], seq)
}

// copyTo copies the origin's messages up to seq: what retention took before
// it was copied is skipped.
func (s *sim) copyTo(seq ledger.Seq) {
	m := s.m
	for ; m.last < min(seq, s.log.head()); m.last++ {
		if s.log.gone[m.last+1] {
			m.skipped[m.last+1] = true
			s.stats["mirror: skip (purged before copied)"]++
		}
	}
}

// mirrorStep is what the mirror and the link between the regions do, or a
// locked sync of a region-B host.
func (s *sim) mirrorStep() error {
	m := s.m
	switch x := s.r.IntN(100); {
	case x < 35:
		if m.stalled || m.cut {
			s.stats["mirror: stalled, copies nothing"]++
			return nil
		}
		s.copyTo(m.last + ledger.Seq(1+s.r.IntN(6)))
		s.stats["mirror: copied"]++
		s.logf("mirror copies up to seq %d", m.last)
	case x < 47:
		m.stalled = !m.stalled
		if m.stalled {
			s.stats["mirror: stall"]++
			s.logf("mirror stalls at seq %d", m.last)
		} else {
			s.logf("mirror resumes")
		}
	case x < 57:
		m.cut = !m.cut
		if m.cut {
			s.stats["link between the regions cut"]++
			s.logf("the link between the regions is cut: region B cannot reach the origin")
		} else {
			s.logf("the link between the regions is back")
		}
	default:
		var bs []*simHost
		for _, h := range s.hosts {
			if m.regionB[h.name] {
				bs = append(bs, h)
			}
		}
		return s.lockedSync(bs[s.r.IntN(len(bs))], s.partition(s.r.IntN(s.cfg.partitions)))
	}
	return nil
}

// mirrorCalm ends the faults for the final syncs: the link is back and the
// mirror caught up.
func (s *sim) mirrorCalm() {
	s.m.stalled, s.m.cut = false, false
	s.copyTo(s.log.head())
}

// readVia reads seqs from..to as a region-B host's log does: from the
// mirror what it holds, from the origin the rest. It stops (stopped) at the
// first seq neither can give — the mirror lacks it and the origin is out of
// reach —; a seq the origin purged is ledger.ErrTruncated, as at the origin.
func (s *sim) readVia(from, to ledger.Seq) (recs []ledger.Record, stopped bool, err error) {
	m := s.m
	for seq := from; seq <= to; seq++ {
		if seq <= m.last && !m.skipped[seq] {
			recs = append(recs, s.log.rec(seq))
			continue
		}
		if m.cut {
			s.stats["mirror: read stops, origin unreachable"]++
			return recs, true, nil
		}
		if s.log.gone[seq] {
			if m.skipped[seq] {
				s.stats["mirror: skip asked of the origin: gone"]++
			}
			return nil, false, s.log.truncated(seq)
		}
		s.stats["mirror: read from the origin"]++
		recs = append(recs, s.log.rec(seq))
	}
	return recs, false, nil
}

// mirrorFullSync is fullSync for a region-B host.
func (s *sim) mirrorFullSync(h *simHost, crashes bool) error {
	if err := s.resume(h); err != nil {
		return err
	}
	if err := h.core.AdoptLineage(s.log.info); err != nil {
		return err
	}
	m := s.m
	hwm := h.core.HWM()
	head := max(m.last, m.floor[h.name]) // the mirror's word, raised to the floor
	if head < hwm {
		// The mirror lags this cache: only the origin says whether the log
		// went back.
		if m.cut {
			s.stats["mirror: sync refused, behind the HWM and origin unreachable"]++
			s.logf("%s: mirror at %d below its HWM %d, origin out of reach: sync refused", h.name, m.last, hwm)
			if h.core.HasReady() {
				h.core.Discard()
			}
			return errCrash
		}
		head = s.log.head()
		m.raise(h, head)
		s.stats["mirror: behind the HWM, the origin asked"]++
	}
	if head < s.log.head() {
		s.stats["mirror: sync by the mirror's word, the origin newer (said so)"]++
	}
	from, to := hwm+1, head
	if crashes && to >= from && s.r.IntN(3) == 0 {
		to = from - 1 + ledger.Seq(s.r.IntN(int(to-from)+2))
	}
	s.logf("%s full sync %d..%d through the mirror (at %d)", h.name, from, to, m.last)
	s.stats["full sync"]++
	recs, stopped, err := s.readVia(from, to)
	if errors.Is(err, ledger.ErrTruncated) {
		s.stats["full sync: log truncated, rebuild"]++
		s.logf("%s: %v: rebuild", h.name, err)
		if err := s.rebuild(h); err != nil {
			return err
		}
		return s.mirrorFullSync(h, crashes)
	}
	if err != nil {
		return err
	}
	if n := len(recs); n > 0 && !recs[n-1].LastOfCommit() {
		s.stats["mirror: read ending inside a commit"]++
	}
	recs, dropped := s.deliver(recs)
	if len(recs) == 0 {
		if h.core.HasReady() {
			if err := s.finish(h, crashes); err != nil {
				return err
			}
		}
		if stopped {
			return errCrash
		}
		return nil
	}
	if err := s.offer(h, Full, recs, crashes); err != nil {
		return err
	}
	if dropped || stopped {
		s.logf("%s: read cut short: what was read is persisted", h.name)
		return errCrash
	}
	return nil
}

// mirrorScopedSync is scopedSync for a region-B host; fresh is a locked
// sync's (the origin's head first). It returns the records it read.
func (s *sim) mirrorScopedSync(h *simHost, parts []string, crashes, fresh bool) ([]ledger.Record, error) {
	if err := s.resume(h); err != nil {
		return nil, err
	}
	if err := h.core.AdoptLineage(s.log.info); err != nil {
		return nil, err
	}
	m := s.m
	if fresh && !s.cfg.mirrorTrust {
		if m.cut {
			s.stats["locked sync refused: origin unreachable"]++
			s.logf("%s: locked sync refused: the origin is out of reach", h.name)
			if h.core.HasReady() {
				h.core.Discard()
			}
			return nil, errCrash
		}
		m.raise(h, s.log.head()) // one stream info the origin's leader answers
	}
	var recs []ledger.Record
	for _, p := range parts {
		from := h.core.mustMark(p).Seq + 1
		var rs []ledger.Record
		if m.last >= m.floor[h.name] {
			// The mirror covers the floor: its partition, the skips asked
			// of the origin.
			var mine []ledger.Record
			if m.last >= from {
				mine = s.log.memLog.readPartition(p, from, m.last)
			}
			for _, r := range mine {
				if m.skipped[r.Seq] {
					if m.cut {
						s.stats["mirror: read stops, origin unreachable"]++
						break
					}
					if s.log.gone[r.Seq] {
						s.stats["scoped sync: log truncated"]++
						h.core.Discard()
						return nil, errCrash
					}
				}
				rs = append(rs, r)
			}
		} else {
			if m.cut {
				s.stats["mirror: read stops, origin unreachable"]++
				if h.core.HasReady() {
					h.core.Discard()
				}
				return nil, errCrash
			}
			var err error
			rs, err = s.log.readPartitionSafe(p, from, 0)
			if errors.Is(err, ledger.ErrTruncated) {
				s.stats["scoped sync: log truncated"]++
				h.core.Discard()
				return nil, errCrash
			}
			s.stats["mirror: partition read from the origin"]++
		}
		recs = append(recs, rs...)
	}
	s.logf("%s scoped sync %v through the mirror (at %d, floor %d): %d records", h.name, parts, m.last, m.floor[h.name], len(recs))
	s.stats["scoped sync"]++
	var err error
	switch {
	case len(recs) > 0:
		err = s.offer(h, Scoped, recs, crashes)
	case h.core.HasReady():
		err = s.finish(h, crashes)
	}
	return recs, err
}

// lockedSync is a swamp command's pull under the lock of partition p's
// model, by a region-B host: a fresh scoped sync, checked against I11.
func (s *sim) lockedSync(h *simHost, p string) error {
	s.stats["locked sync"]++
	if err := s.resume(h); err != nil { // an interrupted rebuild first: it moves the mark
		return err
	}
	mark := h.core.mustMark(p).Seq
	originLast := s.log.heads[p].Seq
	if originLast > max(s.m.last, s.m.floor[h.name]) {
		s.stats["locked sync: the origin newer than the mirror"]++
	}
	recs, err := s.mirrorScopedSync(h, []string{p}, false, true)
	if err != nil {
		return err
	}
	if originLast <= mark {
		return nil
	}
	if len(recs) == 0 {
		return fmt.Errorf("I11: %s holds the lock of %s and its sync answered nothing new, while the origin's last event of it is seq %d (the host's mark %d, the mirror at %d)", h.name, p, originLast, mark, s.m.last)
	}
	if got := recs[len(recs)-1].Seq; got < originLast {
		return fmt.Errorf("I11: %s holds the lock of %s and its sync read it up to seq %d, while the origin's last event of it is seq %d", h.name, p, got, originLast)
	}
	return nil
}

// mirrorHistory is historyConfig with a mirror.
func mirrorHistory(seed uint64) simConfig {
	cfg := historyConfig(seed, true)
	cfg.fences, cfg.mirror = true, true
	return cfg
}

// TestSimulationMirror plays -sim.histories seeded histories whose region-B
// hosts read through a mirror that lags, stalls, skips and is cut off from
// the origin (CI runs 2,000): 0 violations of I1-I11, and the situations
// the mirror makes all reached.
func TestSimulationMirror(t *testing.T) {
	n := *simHistories
	if testing.Short() {
		n = min(n, 200)
	}
	seeds := simSeeds(t, n)
	total, bad, err := runHistories(seeds, mirrorHistory)
	if err != nil {
		t.Fatalf("%v\nreplay: go test ./projector -run 'TestSimulationMirror$' -seed %d -v", err, bad)
	}
	t.Logf("%d mirror histories, 0 invariant violations; situations: %v", len(seeds), total)
	if *seedFlag == 0 && len(seeds) >= 200 {
		for _, k := range []string{
			"mirror: copied", "mirror: stall", "mirror: stalled, copies nothing", "link between the regions cut",
			"mirror: skip (purged before copied)", "mirror: read from the origin", "mirror: read stops, origin unreachable",
			"mirror: read ending inside a commit", "mirror: behind the HWM, the origin asked",
			"mirror: sync refused, behind the HWM and origin unreachable", "mirror: sync by the mirror's word, the origin newer (said so)",
			"mirror: partition read from the origin", "locked sync", "locked sync: the origin newer than the mirror",
			"locked sync refused: origin unreachable", "own commit refused: origin unreachable",
			"own commit", "full sync", "scoped sync", "rebuild",
		} {
			if total[k] == 0 {
				t.Errorf("no %q in %d mirror histories", k, len(seeds))
			}
		}
	}
}

// TestSimulationMirrorCatchesTrust: a locked sync that takes the mirror's
// word (no origin head first) is caught as I11 in the first histories.
func TestSimulationMirrorCatchesTrust(t *testing.T) {
	seeds := simSeeds(t, 100)
	caught := 0
	for _, seed := range seeds {
		cfg := mirrorHistory(seed)
		cfg.mirrorTrust = true
		err := newSim(cfg).run()
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "I11:") {
			t.Fatalf("seed %d: caught as something other than I11: %v", seed, err)
		}
		if caught == 0 {
			t.Logf("caught: %s", strings.SplitN(err.Error(), "\n", 2)[0])
		}
		caught++
	}
	if caught == 0 {
		t.Fatalf("the checker did not catch a locked sync trusting the mirror in %d histories", len(seeds))
	}
	t.Logf("caught in %d of %d histories", caught, len(seeds))
}

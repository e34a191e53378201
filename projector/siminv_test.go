package projector

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// The simulator's checker: the invariants of docs/design.md §5, checked after every
// step on every host's persisted state and cache, and on the log.
//
//	I1 chain       checkHost: each mark is a chain position; the index is the
//	               fold of the partition's events 1..modelSeq
//	I2 safety      checkHost: every seq ≤ HWM applied; the HWM a commit end
//	I3 monotone    checkHost: HWM and marks never decrease (a rebuild resets)
//	I4 durable     checkCache: the cache is the persisted index, or a later
//	               event's content (an apply or commit interrupted by a crash);
//	               sameAsUninterrupted at the end
//	I5 content     checkCache: every cached file is content some event wrote
//	I6 no dangling checkLog: every blob an event references is stored
//	I7 atomic      checkLog: each commit's parts at consecutive seqs, once
//	I8 convergence converged, after the final full syncs
//	I9 lineage     checkHost: the state's lineage is the log's (foreignProbe
//	               offers a foreign log and its events)
//	I10 never stuck  finish (stuckCheck): the host never refuses a Ready over
//	               the ledger's own content (a file and a directory of one
//	               name, an own commit it never recorded, an interrupted
//	               apply), and the cache is always a tree (checkCache)

// check verifies the invariants on the log and every host.
func (s *sim) check() error {
	if err := s.checkLog(); err != nil {
		return err
	}
	for _, h := range s.hosts {
		if err := s.checkHost(h); err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		if err := s.checkCache(h); err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		h.seen = h.disk.Clone()
	}
	return nil
}

// checkLog checks the records appended since the last check: I6 and I7.
func (s *sim) checkLog() error {
	for ; s.checked < s.log.head(); s.checked++ {
		r := s.log.rec(s.checked + 1)
		e := r.Event
		for _, en := range e.Entries {
			if _, ok := s.log.blobs[en.SHA256]; !en.Deleted && !ok {
				return fmt.Errorf("I6: seq %d (%s) references blob %s of %s, which is not stored", r.Seq, e.Partition, en.SHA256, en.Path)
			}
		}
		first := r.Seq - ledger.Seq(e.Part-1)
		if e.Part == 1 {
			if at, dup := s.commits[e.Commit]; dup {
				return fmt.Errorf("I7: commit %s stored twice, at seqs %d and %d", e.Commit, at, r.Seq)
			}
			s.commits[e.Commit] = r.Seq
		} else if f := s.log.rec(first).Event; s.commits[e.Commit] != first || f.Commit != e.Commit || f.Parts != e.Parts {
			return fmt.Errorf("I7: seq %d is part %d/%d of commit %s, but seq %d is not its part 1", r.Seq, e.Part, e.Parts, e.Commit, first)
		}
	}
	// A commit whose parts are not all stored would show as a last record
	// that is not a commit end.
	if h := s.log.head(); h > 0 && !s.log.rec(h).LastOfCommit() {
		return fmt.Errorf("I7: the log ends inside a commit at seq %d", h)
	}
	return nil
}

func (s *sim) checkHost(h *simHost) error {
	d := h.disk
	if !equalState(h.core.mustState(), d) {
		return errors.New("the core's durable state differs from the persisted state")
	}
	// I9 lineage.
	if d.Ledger != "" && d.Ledger != s.log.info.UUID {
		return fmt.Errorf("I9: state of ledger %s on the log of ledger %s", d.Ledger, s.log.info.UUID)
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
		if r.Skip != nil {
			continue // quarantined: nothing to apply (simquarantine_test.go)
		}
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

// checkCache checks the cache against the persisted state (I4) and the log
// (I5): every path holds what the index says (a lazy file may be absent, or
// hold its content after an interrupted hydration), or what a later event of
// its partition wrote — the trace of an apply or an own commit interrupted
// before its state was persisted, which the next sync completes. A file whose
// content no event ever wrote at that path breaks I5.
func (s *sim) checkCache(h *simHost) error {
	paths := map[string]bool{}
	for p := range h.cache {
		paths[p] = true
	}
	for p := range h.disk.Files {
		paths[p] = true
	}
	shadowed := shadowedSet(h.disk.Files)
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		c, cached := h.cache[path]
		f, indexed := h.disk.Files[path]
		if cached {
			if a, ok := treeDisk(h.cache).fileAbove(path); ok {
				return fmt.Errorf("I10: the cache holds %s under the file %s", path, a)
			}
		}
		switch {
		case indexed && cached && c == f.SHA256 && !shadowed[path]:
			continue // as indexed (or a lazy file whose hydration was interrupted)
		case indexed && (f.Lazy || shadowed[path]) && !cached:
			continue // metadata only, or a directory of its name wins
		}
		if cached && !s.everWrote(path, c) {
			return fmt.Errorf("I5: cache file %s holds content (sha256 %s) that no event wrote", path, c)
		}
		if j, ok := h.journal[path]; ok && (j.matches(cached, c) || j.matchesOwn(cached, c)) {
			continue // written (or removed) by the shell, journalled: not a local change
		}
		if !s.laterExplains(h, path, c, cached) {
			return fmt.Errorf("I4: cache file %s is %s, the index says %s, and no later event explains it",
				path, describe(c, cached), describeFile(f, indexed))
		}
	}
	return nil
}

func describe(d ledger.Digest, ok bool) string {
	if !ok {
		return "absent"
	}
	return "sha256 " + d.String()[:12]
}

func describeFile(f File, ok bool) string {
	if !ok {
		return "nothing"
	}
	return fmt.Sprintf("sha256 %s (lazy %v)", f.SHA256.String()[:12], f.Lazy)
}

// everWrote reports whether some event of the log wrote content d at path.
func (s *sim) everWrote(path string, d ledger.Digest) bool {
	for _, r := range s.log.readPartition(ledger.PartitionKey(path), 1, 0) {
		for _, en := range r.Event.Entries {
			if en.Path == path && !en.Deleted && en.SHA256 == d {
				return true
			}
		}
	}
	return false
}

// laterExplains reports whether an event of path's partition after the host's
// mark leaves path as the cache has it.
func (s *sim) laterExplains(h *simHost, path string, c ledger.Digest, cached bool) bool {
	p := ledger.PartitionKey(path)
	for _, r := range s.log.readPartition(p, h.disk.Marks[p].Seq+1, 0) {
		for _, en := range r.Event.Entries {
			switch {
			case en.Path != path:
			case en.Deleted && !cached:
				return true
			case !en.Deleted && cached && en.SHA256 == c:
				return true
			case !en.Deleted && !cached && h.cfg.Lazy && ledger.IsLazySkippable(path):
				return true // applied as metadata only: the file removed
			}
		}
	}
	return false
}

// shadowedSet is ShadowedPaths of an index, as a set.
func shadowedSet(files map[string]File) map[string]bool {
	out := map[string]bool{}
	for _, p := range ShadowedPaths(slices.Collect(maps.Keys(files))) {
		out[p] = true
	}
	return out
}

// converged checks I8 after the final full syncs: every host at the head, with
// the ledger's files, and a cache that holds them (lazy ones may be absent,
// shadowed ones must be: a directory of their name wins).
func (s *sim) converged() error {
	head := s.log.head()
	want := map[string]ledger.Entry{}
	for p := range s.log.heads {
		maps.Copy(want, s.log.filesAt(p, head))
	}
	wantFiles := map[string]File{}
	for p := range want {
		wantFiles[p] = File{}
	}
	shadowed := shadowedSet(wantFiles)
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
			switch {
			case shadowed[path]:
				if cached {
					return fail("cache holds %s, which a directory of its name shadows", path)
				}
			case f.Lazy && cached && d != f.SHA256 || !f.Lazy && d != f.SHA256:
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

// sameAsUninterrupted checks I4 at the end: a host that never crashed and saw
// no fault — a new one, restored from the newest snapshot when the log was
// purged, then fully synced — holds the same marks, HWM, index and files as
// every host that lived through the history.
func (s *sim) sameAsUninterrupted() error {
	st := State{}.Clone()
	from := ledger.Seq(1)
	if sn, ok := s.log.newestSnapshot(); ok && s.log.purgedTo > 0 {
		st = State{Ledger: s.log.info.UUID, HWM: sn.seq, Marks: maps.Clone(sn.marks), Files: map[string]File{}}
		for p, en := range sn.files {
			st.Files[p] = File{SHA256: en.SHA256, Size: en.Size, Mode: en.Mode}
		}
		from = sn.seq + 1
	}
	w, err := newCoreOf(st, Config{})
	if err != nil {
		return s.fail(fmt.Errorf("I4: uninterrupted host: %w", err))
	}
	if err := w.AdoptLineage(s.log.info); err != nil {
		return s.fail(err)
	}
	recs, err := s.log.readSafe(from, 0)
	if err != nil {
		return s.fail(fmt.Errorf("I4: uninterrupted host: %w", err))
	}
	for _, r := range recs {
		if _, err := w.Step(Full, r); err != nil {
			return s.fail(fmt.Errorf("I4: uninterrupted host: %w", err))
		}
	}
	w.persistAdvance(w.mustReady())
	ws := w.mustState()
	for _, h := range s.hosts {
		fail := func(format string, args ...any) error {
			return s.fail(fmt.Errorf("I4: %s differs from an uninterrupted host: "+format, append([]any{h.name}, args...)...))
		}
		if h.disk.HWM != ws.HWM || !maps.Equal(h.disk.Marks, ws.Marks) {
			return fail("HWM %d marks %v, want HWM %d marks %v", h.disk.HWM, h.disk.Marks, ws.HWM, ws.Marks)
		}
		if len(h.disk.Files) != len(ws.Files) {
			return fail("%d files, want %d", len(h.disk.Files), len(ws.Files))
		}
		shadowed := shadowedSet(ws.Files)
		for path, f := range ws.Files {
			if g := h.disk.Files[path]; !g.SameContent(f) {
				return fail("%s is %+v, want %+v", path, g, f)
			}
			if d, ok := h.cache[path]; shadowed[path] && ok {
				return fail("cache holds the shadowed %s", path)
			} else if !shadowed[path] && !h.disk.Files[path].Lazy && (!ok || d != f.SHA256) {
				return fail("cache %s is %s, want %s", path, describe(d, ok), f.SHA256)
			}
		}
	}
	return nil
}

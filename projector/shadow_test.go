package projector

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// clashPaths are files and paths under them that fall in different partitions
// ("x" in _root, "x/y" in x; data/t/m/x in data--t--m, data/t/m/x/y in
// data--t--m--x) or in the same one.
var clashPaths = []string{
	"x", "x/y", "x/y/z", "x/w", "q",
	"data/t/m/x", "data/t/m/x/y", "data/t/m/x/y/a/b", "data/t/m/x/y/a",
}

// treeDisk is a cache as a file system holds it: files only, directories
// implied by the paths under them; a file and a directory of one name cannot
// both exist.
type treeDisk map[string]ledger.Digest

func (d treeDisk) dirHolds(p string) bool {
	for q := range d {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

func (d treeDisk) fileAbove(p string) (string, bool) {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			if _, ok := d[p[:i]]; ok {
				return p[:i], true
			}
		}
	}
	return "", false
}

func holds(d treeDisk, p string, f *File) bool {
	c, ok := d[p]
	if f == nil {
		return !ok
	}
	return ok && c == f.SHA256
}

// applyTree applies rd to disk the way projector/host does, failing where the
// host would stop: a file that matches neither the index nor anything the
// ledger wrote (taken for a local change), a write under a file or onto a
// directory. Removals go first, then writes.
func applyTree(disk treeDisk, rd Ready) error {
	for _, ch := range rd.Changes {
		if ch.Op == OpIndex {
			continue
		}
		_, exists := disk[ch.Path]
		ok := holds(disk, ch.Path, ch.Old) || !exists && ch.Old != nil && (ch.Old.Lazy || ch.OldShadowed) ||
			holds(disk, ch.Path, ch.New) || ch.Op != OpWrite && !exists
		for _, f := range ch.Earlier {
			ok = ok || holds(disk, ch.Path, f)
		}
		if !ok {
			return &refusal{ch.Path, fmt.Sprintf("%s %s: the cache holds %s, the Ready expects %s or %s: taken for a local change",
				ch.Op, ch.Path, describe(disk[ch.Path], exists), describeFile(deref(ch.Old)), describeFile(deref(ch.New)))}
		}
	}
	// The tree must allow the writes once the removals are done; a file in
	// the way that the Ready does not remove is a local file.
	after := maps.Clone(disk)
	for _, ch := range rd.Changes {
		if ch.Op == OpDelete || ch.Op == OpLazy || ch.Op == OpShadow {
			delete(after, ch.Path)
		}
	}
	for _, ch := range rd.Changes {
		if ch.Op != OpWrite {
			continue
		}
		if a, ok := after.fileAbove(ch.Path); ok {
			return &refusal{a, fmt.Sprintf("write %s: %s is a file", ch.Path, a)}
		}
		for q := range after {
			if strings.HasPrefix(q, ch.Path+"/") {
				return &refusal{q, fmt.Sprintf("write %s: it is a directory holding %s", ch.Path, q)}
			}
		}
		after[ch.Path] = ch.New.SHA256
	}
	clear(disk)
	maps.Copy(disk, after)
	return nil
}

// refusal: the host would stop, taking the file at path for a local change.
type refusal struct{ path, msg string }

func (e *refusal) Error() string { return e.msg }

func deref(f *File) (File, bool) {
	if f == nil {
		return File{}, false
	}
	return *f, true
}

// naiveShadowed is the rule stated plainly: a file with another indexed path
// under it.
func naiveShadowed(files map[string]File) []string {
	var out []string
	for p := range files {
		for q := range files {
			if strings.HasPrefix(q, p+"/") {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkTree compares the cache with what the index says it holds: every file
// not shadowed and not lazy, with its content; nothing else.
// Paths in skip (written by the host's own commits it never recorded) are not
// checked.
func checkTree(disk treeDisk, c *Core, skip map[string]bool) error {
	st := c.mustState()
	shadowed := naiveShadowed(st.Files)
	if got := must(c.ShadowedFiles()); !slices.Equal(got, shadowed) {
		return fmt.Errorf("ShadowedFiles %q, want %q", got, shadowed)
	}
	for p, f := range st.Files {
		d, ok := disk[p]
		switch {
		case skip[p]:
		case slices.Contains(shadowed, p):
			if !c.mustShadowed(p) || ok {
				return fmt.Errorf("%s is shadowed (Shadowed %v) but the cache holds it (%v)", p, c.mustShadowed(p), ok)
			}
		case c.mustShadowed(p):
			return fmt.Errorf("%s: Shadowed, but nothing lies under it", p)
		case f.Lazy:
			if ok && d != f.SHA256 {
				return fmt.Errorf("lazy %s holds other content", p)
			}
		case !ok || d != f.SHA256:
			return fmt.Errorf("%s: cache %s, index %s", p, describe(d, ok), f.SHA256)
		}
	}
	for p := range disk {
		if _, ok := st.Files[p]; !ok && !skip[p] {
			return fmt.Errorf("cache holds %s, the index does not", p)
		}
	}
	return nil
}

// TestShadowProperty plays random histories over clashing paths — remote
// writers that race (file and directory of one name across partitions), the
// host's own commits (some lost before they were recorded: a crash after the
// append) — applied in random batches, full or scoped, and checks after every
// Ready that the host could apply it to a real tree without stopping and that
// the cache is what the naive rule says; at the end, that hosts that read the
// log in other batches and a fresh host hold the same index and cache.
func TestShadowProperty(t *testing.T) {
	base := testSeed(t)
	for i := range 300 {
		seed := base + uint64(i)
		if err := shadowHistory(seed); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./projector -run TestShadowProperty -seed %d", seed, err, seed)
		}
	}
}

type treeHost struct {
	core *Core
	disk treeDisk
	// unrecorded: paths of own commits lost in a crash after the append,
	// until a full sync has read them
	unrecorded map[string]bool
}

func shadowHistory(seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 7))
	l := newMemLog(testLedger)
	hosts := make([]*treeHost, 3)
	for i := range hosts {
		c, err := newCoreOf(State{}, Config{Lazy: i == 1})
		if err != nil {
			return err
		}
		if err := c.AdoptLineage(l.info); err != nil {
			return err
		}
		hosts[i] = &treeHost{core: c, disk: treeDisk{}, unrecorded: map[string]bool{}}
	}
	content := func(p string) ledger.Entry { return l.write(p, fmt.Sprintf("%s@%d", p, r.IntN(3))) }
	apply := func(h *treeHost) error {
		rd := h.core.mustReady()
		if err := applyTree(h.disk, rd); err != nil {
			return err
		}
		h.core.persistAdvance(rd)
		return checkTree(h.disk, h.core, h.unrecorded)
	}
	// refused reports whether err is the host stopping at the file of an own
	// commit it never recorded, whose event the batch does not hold: it
	// cannot tell that file from a local change. A read that holds the event
	// (a full sync's batch of up to 4096 events, a commit's catch-up) applies it.
	refused := func(h *treeHost, err error) bool {
		rf := (*refusal)(nil)
		if errors.As(err, &rf) && h.unrecorded[rf.path] {
			h.core.Discard()
			return true
		}
		return false
	}
	sync := func(h *treeHost, full, oneBatch bool) error {
		if full {
			recs := l.read(h.core.HWM()+1, 0)
			for len(recs) > 0 {
				n := 1 + r.IntN(len(recs))
				if oneBatch {
					n = len(recs)
				}
				for _, rec := range recs[:n] {
					if _, err := h.core.Step(Full, rec); err != nil {
						return err
					}
				}
				recs = recs[n:]
				if err := apply(h); err != nil {
					if !oneBatch && refused(h, err) {
						return nil
					}
					return err
				}
			}
			clear(h.unrecorded)
			return apply(h)
		}
		p := ledger.PartitionKey(clashPaths[r.IntN(len(clashPaths))])
		for _, rec := range l.readPartition(p, h.core.mustMark(p).Seq+1, 0) {
			if _, err := h.core.Step(Scoped, rec); err != nil {
				return err
			}
		}
		if err := apply(h); !refused(h, err) {
			return err
		}
		return nil
	}
	for step := range 40 {
		h := hosts[r.IntN(len(hosts))]
		var err error
		switch x := r.IntN(10); {
		case x < 4: // a remote writer, up to date with the log, blind to clashes
			var es []ledger.Entry
			for _, j := range r.Perm(len(clashPaths))[:1+r.IntN(2)] {
				p := clashPaths[j]
				if _, ok := l.filesAt(ledger.PartitionKey(p), 0)[p]; ok && r.IntN(3) == 0 {
					es = append(es, del(p))
				} else {
					es = append(es, content(p))
				}
			}
			_, err = l.commitRemote("w", es)
		case x < 7:
			err = sync(h, r.IntN(2) == 0, false)
		default:
			err = ownCommit(r, l, h, content, apply)
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	for _, h := range hosts {
		if err := sync(h, true, true); err != nil {
			return fmt.Errorf("final sync: %w", err)
		}
	}
	// A fresh host reading the whole log at once.
	fresh := &treeHost{disk: treeDisk{}, unrecorded: map[string]bool{}}
	var err error
	if fresh.core, err = newCoreOf(State{}, Config{}); err != nil {
		return err
	}
	if err := fresh.core.AdoptLineage(l.info); err != nil {
		return err
	}
	for _, rec := range l.read(1, 0) {
		if _, err := fresh.core.Step(Full, rec); err != nil {
			return err
		}
	}
	if err := apply(fresh); err != nil {
		return fmt.Errorf("fresh host: %w", err)
	}
	want := fresh.core.mustState()
	for i, h := range hosts {
		st := h.core.mustState()
		if st.HWM != l.head() || !maps.EqualFunc(st.Files, want.Files, File.SameContent) {
			return fmt.Errorf("host %d: hwm %d (head %d), index differs from a fresh host's", i, st.HWM, l.head())
		}
		if i != 1 && !maps.Equal(h.disk, fresh.disk) { // host 1 is lazy
			return fmt.Errorf("host %d: cache %v, a fresh host's %v", i, h.disk, fresh.disk)
		}
	}
	return nil
}

// ownCommit changes one file of the host's cache as a user would (only where
// the tree allows it), commits it, and records it — or crashes after the
// append, before recording it.
func ownCommit(r *rand.Rand, l *memLog, h *treeHost, content func(string) ledger.Entry, apply func(*treeHost) error) error {
	if h.core.HasReady() {
		return nil
	}
	p := clashPaths[r.IntN(len(clashPaths))]
	var en ledger.Entry
	if _, ok := h.disk[p]; ok && r.IntN(2) == 0 {
		en = del(p)
	} else if _, above := h.disk.fileAbove(p); above || h.disk.dirHolds(p) {
		return nil // the tree does not allow it
	} else {
		en = content(p)
	}
	for _, m := range []string{ledger.PartitionKey(p)} {
		if h.core.mustMark(m) != l.mark(m) {
			return nil // would lose the chain race: not what this tests
		}
	}
	evs, err := h.core.CommitEvents(l.newCommit("h", []ledger.Entry{en}))
	var ce *ClashError
	if errors.As(err, &ce) {
		files := h.core.mustState().Files
		if en.Deleted {
			return fmt.Errorf("deletion of %s refused: %v", p, err)
		}
		if !strings.HasPrefix(ce.Under, ce.File+"/") {
			return fmt.Errorf("clash of %s: %v names no path under a file", p, err)
		}
		if _, ok := files[ce.File]; !ok && ce.File != p {
			return fmt.Errorf("clash of %s: %v: %s is no file", p, err, ce.File)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if en.Deleted {
		delete(h.disk, p)
	} else {
		h.disk[p] = en.SHA256
	}
	seqs, err := l.append(evs)
	if err != nil {
		return err
	}
	if r.IntN(3) == 0 { // crash after the append: the commit is not recorded
		c, err := newCoreOf(h.core.mustState(), h.core.cfg)
		if err != nil {
			return err
		}
		if err := c.AdoptLineage(l.info); err != nil {
			return err
		}
		h.core = c
		h.unrecorded[p] = true
		return nil
	}
	if err := h.core.RecordOwn(evs, seqs); err != nil {
		return err
	}
	return apply(h)
}

package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/ignore"
	"github.com/syncledger/syncledger/projector/statedb"
)

// scanned is the result of comparing the cache with the index.
type scanned struct {
	changes []ledger.Entry              // sorted by path
	infos   map[string]cachefs.FileInfo // what the scan saw of each changed file
	ignored []string                    // paths the ignore rules leave out (directories end in /)
	// unsynced: the paths the scan could not take (cachefs.Skipped, not
	// ignored), each warned of: nothing at or below them is a change.
	unsynced map[string]bool
	// over, when not nil, says the scan found more changes than it was to
	// hold (scan's hold): it holds none of them, only how many each partition
	// has — files whose size, mtime or mode differ from their rows, and
	// deletions: an upper bound — for Commit to publish them a bounded group
	// of partitions at a time.
	over map[string]int
	// staged, with over, is the content the scan staged before it stopped
	// holding (put called): the groups' commits do not store it again.
	staged map[ledger.Digest]bool
	// overDeleted, with over, holds the partitions with deletions among
	// their changes: the groups of the others look for none (scanBound).
	overDeleted map[string]bool
}

// scanBound is what a commit's scan holds and looks for.
type scanBound struct {
	// hold, when positive, is the most changes the scan holds (scanned.over
	// past it).
	hold int
	// noDeletions leaves deletions out: the index is not read for them. A
	// group of a split commit whose partitions its first walk found no
	// deletion in: one made since is the next commit's, as any change made
	// while a commit runs may be; and a group's walk then reads no row of
	// the partitions it does not commit (the seeks past them would bring
	// the whole index into memory, group after group).
	noDeletions bool
	// known is the work done ahead (Prepared) the scan takes rather than
	// read a file again, and keeps what it reads in (nil: none); settle,
	// with it, waits for a file just written (settleStamp) so that what it
	// reads is kept: a Prepare's, whose work its Commit takes.
	known  *Prepared
	settle bool
}

// stage is what a scan does with each changed file while it holds it open,
// its content read once: body is the content when the file is small enough
// to read whole (smallFile), else nil and f is to be read again from its start.
type stage func(e ledger.Entry, f *os.File, body []byte) error

// smallFile is the size up to which the scan reads a file whole, hashing and
// staging it from memory (one read of the file); at most cfg.Parallel such
// buffers are in use at once.
const smallFile = 1 << 20

// candidate is a file the walk found that the index does not vouch for.
type candidate struct {
	rel   string
	fi    cachefs.FileInfo
	row   statedb.Entry
	ok    bool          // row is the path's index row
	found *ledger.Entry // hashOne's answer
}

// scan compares the cache with the index: size, mtime and mode first, SHA-256 for
// files that differ. A lazy file absent from the cache is not a deletion, nor is
// an ignored one (package ignore): ignored paths are neither committed nor
// deleted. A path the scan cannot take — a symlink, a FIFO or other special
// file, a directory it cannot read, a file it cannot open — is not synced: it
// is warned of, and nothing at or below it is a change (issue 26: a directory
// replaced by a symlink published the deletion of every file under it).
//
// changed, when not nil, limits the scan to those paths and their subtrees
// (CommitOptions.Changed). put, when set, is called for each changed file
// (stage), in parallel.
//
// A walk of the cache (changed nil) holds no set of the paths it saw: each
// directory's index rows are compared with what the walk found there as it
// leaves it (walkTrack). bound.hold, when positive, bounds the changes a
// scan holds: past it, the scan stops hashing and only counts each
// partition's changes (scanned.over), for Commit to publish them a bounded
// group at a time.
//
// The scan is in four parts, each a scanner method: the walk (walk, visit),
// the hashing beside it (hashers), the deletions (deleted, and walkTrack or
// the rows under changed) and what it found (result).
func (h *Host) scan(s *session, parts partitions, changed []string, put stage, bound scanBound) (scanned, error) {
	sc, err := h.newScanner(s, parts, changed, put, bound)
	if err != nil {
		return sc.out, err
	}
	if err := sc.walk(); err != nil {
		return sc.out, fmt.Errorf("scan cache: %w", err)
	}
	return sc.result()
}

// scanner is one scan's state (scan).
type scanner struct {
	h       *Host
	s       *session
	parts   partitions
	changed []string // nil: the whole cache
	put     stage
	hold    int // scanBound.hold while the walk runs; 0 after it
	known   *Prepared
	settle  bool
	ign     *ignore.Matcher

	out   scanned
	mu    sync.Mutex   // guards out.unsynced against the hashers
	cands []*candidate // the files the index does not vouch for, in walk order
	early []*candidate // with out.over: the ones hashed before it
	gone  []string     // indexed paths the scan covers and did not see
	// Deletions: a walk's come from trk, a scan of changed's from the paths
	// it saw (seen) and the rows under changed; neither with noDeletions.
	seen map[string]bool
	trk  *walkTrack
}

func (h *Host) newScanner(s *session, parts partitions, changed []string, put stage, bound scanBound) (*scanner, error) {
	sc := &scanner{h: h, s: s, parts: parts, changed: changed, put: put, hold: bound.hold, known: bound.known, settle: bound.settle,
		out: scanned{infos: map[string]cachefs.FileInfo{}, unsynced: map[string]bool{}}}
	var err error
	if sc.ign, err = h.dir.Ignore(); err != nil {
		return sc, err
	}
	if slices.ContainsFunc(changed, func(c string) bool { c = strings.Trim(c, "/"); return c == "" || c == "." }) {
		sc.changed = nil // the whole cache
	}
	switch {
	case bound.noDeletions:
	case sc.changed == nil:
		sc.trk = &walkTrack{rows: h.rows, enter: parts.enter(), unseen: sc.deleted}
	default:
		sc.seen = map[string]bool{}
	}
	return sc, nil
}

// notSynced warns of a path the scan cannot take: nothing at or below it is
// a change.
func (sc *scanner) notSynced(path string, reason any) {
	sc.h.log.Warn("not synced", "path", path, "reason", reason)
	sc.mu.Lock()
	sc.out.unsynced[strings.TrimSuffix(path, "/")] = true
	sc.mu.Unlock()
}

// overflow turns what the scan holds into counts once it holds more than
// its hold.
func (sc *scanner) overflow() {
	if sc.hold <= 0 || sc.out.over != nil || len(sc.cands)+len(sc.gone) <= sc.hold {
		return
	}
	sc.out.over, sc.out.overDeleted = map[string]int{}, map[string]bool{}
	for _, c := range sc.cands {
		sc.out.over[ledger.PartitionKey(c.rel)]++
	}
	for _, p := range sc.gone {
		sc.out.over[ledger.PartitionKey(p)]++
		sc.out.overDeleted[ledger.PartitionKey(p)] = true
	}
	sc.early, sc.cands, sc.gone = sc.cands, nil, nil
}

// deleted takes an indexed path the scan covers and did not see. A lazy
// file's, an ignored or not synced path's, an interrupted apply's removal
// are not deletions.
func (sc *scanner) deleted(p string, row statedb.Entry) {
	if j, jok := sc.s.journal[p]; jok && j.Matches(false, ledger.Digest{}) {
		return // removed by an interrupted apply, not by this host's user
	}
	part := ledger.PartitionKey(p)
	if row.Lazy || !sc.parts.keep(part) || sc.ign.Ignored(p) {
		return
	}
	sc.mu.Lock()
	unsynced := cachefs.Unsynced(sc.out.unsynced, p)
	sc.mu.Unlock()
	switch {
	case unsynced:
	case sc.out.over != nil:
		sc.out.over[part]++
		sc.out.overDeleted[part] = true
	default:
		sc.gone = append(sc.gone, p)
		sc.overflow()
	}
}

// walk walks the cache (or the paths of changed), handing the files the
// index does not vouch for to the hashers as it goes, then finds the
// deletions.
func (sc *scanner) walk() error {
	st := sc.h.dir.NewStater()
	work := make(chan *candidate, sc.h.cfg.Parallel)
	g := sc.hashers(st, work)
	visit := func(rel string, fi cachefs.FileInfo) error { return sc.visit(st, work, rel, fi) }
	var err error
	if sc.changed != nil {
		err = sc.h.dir.ScanPaths(sc.ign, sc.changed, visit, sc.skipped)
	} else {
		err = sc.h.dir.ScanWith(sc.ign, sc.parts.enter(), visit, sc.skipped)
	}
	close(work)
	if err == nil && sc.trk != nil {
		err = sc.trk.finish()
	}
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if err == nil && sc.seen != nil {
		err = sc.h.indexed(sc.changed, sc.parts.enter(), func(p string, row statedb.Entry) {
			if !sc.seen[p] {
				sc.deleted(p, row)
			}
		})
	}
	return err
}

// hashers starts h.cfg.Parallel workers that hash (and stage) the
// candidates of work while the walk goes on (a goroutine a file grew a new
// stack for each: hashing and storing are deep calls). After an error a
// worker only drains.
func (sc *scanner) hashers(st *cachefs.Stater, work <-chan *candidate) *errgroup.Group {
	var g errgroup.Group
	for range sc.h.cfg.Parallel {
		g.Go(func() error {
			var first error
			for c := range work {
				if first != nil {
					continue
				}
				var err error
				c.found, err = sc.h.hashOne(sc.s, st, *c, sc.put, sc.known, sc.settle)
				var ue *unreadableError
				if errors.As(err, &ue) {
					sc.notSynced(c.rel, ue.err)
					c.found, err = nil, nil
				}
				first = err
			}
			return first
		})
	}
	return &g
}

// visit takes one file the walk found: a file the index vouches for (size,
// mtime and mode) is left alone, any other is a candidate, hashed by the
// hashers — or only counted, once the scan holds more than its hold.
func (sc *scanner) visit(st *cachefs.Stater, work chan<- *candidate, rel string, fi cachefs.FileInfo) error {
	if sc.trk != nil {
		if err := sc.trk.file(rel); err != nil {
			return err
		}
	}
	part := ledger.PartitionKey(rel)
	if !sc.parts.keep(part) {
		return nil
	}
	if sc.seen != nil {
		sc.seen[rel] = true
	}
	row, ok, err := sc.h.rows.Get(rel)
	if err != nil {
		return err
	}
	if ok && !row.Lazy && row.Size == fi.Size && row.Mode == fi.Mode && row.MTime.Equal(fi.ModTime) {
		return nil // as recorded: admitted then
	}
	if err := admit(rel); err != nil {
		// The push may not publish it (no event can carry its partition, or
		// some host cannot hold it): leave the file out, never the others.
		sc.notSynced(rel, err)
		return nil
	}
	if sc.out.over != nil {
		sc.out.over[part]++ // counted: the commit of its group hashes it
		return nil
	}
	c := &candidate{rel: rel, fi: fi, row: row, ok: ok}
	sc.cands = append(sc.cands, c)
	sc.overflow()
	st.Walked(rel)
	work <- c
	return nil
}

// skipped takes a path the walk did not enter: ignored, or not synced.
func (sc *scanner) skipped(sk cachefs.Skipped) {
	if sk.Ignored {
		sc.out.ignored = append(sc.out.ignored, sk.Path)
		return
	}
	sc.notSynced(sk.Path, sk.Reason)
}

// result turns what the walk and the hashers found into the scan's changes,
// sorted by path (or, past the hold, the counts and what was staged).
func (sc *scanner) result() (scanned, error) {
	sc.hold = 0 // what the walk held it holds: the files removed since are few
	out := &sc.out
	for _, c := range sc.cands {
		switch e := c.found; {
		case e == nil:
		case e.Path == "": // removed while we walked
			if c.ok {
				sc.deleted(c.rel, c.row)
			}
		default:
			fi := c.fi
			fi.Size = e.Size
			out.infos[c.rel] = fi
			out.changes = append(out.changes, *e)
		}
	}
	if out.over != nil {
		if sc.put != nil {
			out.staged = map[ledger.Digest]bool{}
			for _, c := range sc.early {
				if e := c.found; e != nil && e.Path != "" {
					out.staged[e.SHA256] = true
				}
			}
		}
		return *out, nil
	}
	// A shadowed file absent from the cache is not a deletion: a directory of
	// its name holds other paths (projector.OpShadow).
	for _, p := range sc.gone {
		shadowed, err := sc.s.core.Shadowed(p)
		if err != nil {
			return *out, fmt.Errorf("scan cache: %w", err)
		}
		if !shadowed {
			out.changes = append(out.changes, ledger.Entry{Path: p, Deleted: true})
		}
	}
	sort.Slice(out.changes, func(i, j int) bool { return out.changes[i].Path < out.changes[j].Path })
	return *out, nil
}

// walkTrack finds the deletions of a walk of the cache without a set of every
// path it saw: it keeps the directories the walk is in (the ancestors of the
// last file it reported, a frame each, with the names it reported there), and
// when the walk leaves one — it reports a file outside it, or ends — reads
// that directory's index rows and hands each it did not see to unseen: the
// rows directly in it whose file was not reported, and every row below a
// subdirectory the walk reported no file of (one it did not enter, or found
// empty: nothing under it was seen). The subdirectories it did report files
// of are skipped with a seek (statedb.DB.ForEachEntered): their own frame
// reads them. Memory is the depth of the tree times its widest directory, not
// the number of files.
type walkTrack struct {
	rows   stateRows
	enter  func(dir string) bool // the walk's directory filter (partitions.enter), or nil
	unseen func(path string, row statedb.Entry)
	stack  []*dirFrame // the root first
}

// dirFrame is a directory the walk is in.
type dirFrame struct {
	dir   string          // "" is the cache's root
	files map[string]bool // names of the files the walk reported in it
	subs  map[string]bool // names of its subdirectories the walk reported files of
}

// file records a file the walk reported (rel, slash-separated), leaving the
// directories that do not hold it.
func (t *walkTrack) file(rel string) error {
	dir, name := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	if len(t.stack) == 0 {
		t.stack = append(t.stack, newDirFrame(""))
	}
	// Leave the frames that are not dir or one of its ancestors.
	for len(t.stack) > 1 {
		top := t.stack[len(t.stack)-1].dir
		if dir == top || strings.HasPrefix(dir, top+"/") {
			break
		}
		if err := t.leave(); err != nil {
			return err
		}
	}
	// Enter the directories down to dir.
	for top := t.stack[len(t.stack)-1]; top.dir != dir; top = t.stack[len(t.stack)-1] {
		rest := dir
		if top.dir != "" {
			rest = dir[len(top.dir)+1:]
		}
		sub, _, _ := strings.Cut(rest, "/")
		top.subs[sub] = true
		next := sub
		if top.dir != "" {
			next = top.dir + "/" + sub
		}
		t.stack = append(t.stack, newDirFrame(next))
	}
	t.stack[len(t.stack)-1].files[name] = true
	return nil
}

func newDirFrame(dir string) *dirFrame {
	return &dirFrame{dir: dir, files: map[string]bool{}, subs: map[string]bool{}}
}

// finish leaves every directory, the root last (its rows are read even when
// the walk reported no file at all).
func (t *walkTrack) finish() error {
	if len(t.stack) == 0 {
		t.stack = append(t.stack, newDirFrame(""))
	}
	for len(t.stack) > 0 {
		if err := t.leave(); err != nil {
			return err
		}
	}
	return nil
}

// leave pops the innermost frame and hands out the rows it did not see.
func (t *walkTrack) leave() error {
	f := t.stack[len(t.stack)-1]
	t.stack = t.stack[:len(t.stack)-1]
	prefix := ""
	if f.dir != "" {
		prefix = f.dir + "/"
	}
	enter := func(d string) bool {
		if !strings.Contains(d[len(prefix):], "/") && f.subs[d[len(prefix):]] {
			return false // its own frame read it
		}
		return t.enter == nil || t.enter(d)
	}
	return t.rows.ForEachEntered(prefix, enter, func(p string, row statedb.Entry) (bool, error) {
		if name := p[len(prefix):]; strings.Contains(name, "/") || !f.files[name] {
			t.unseen(p, row)
		}
		return true, nil
	})
}

// hashOne hashes one candidate, reading the file once: whole into a pooled
// buffer when it is small, streamed otherwise — unless known (a Prepared)
// holds its digest read with the file's stat now: then it is not read. It
// returns the entry of its change: nil when its content is the index's
// (touched) or an interrupted apply's, an entry with an empty Path when the
// file is gone. put, when set, stages a changed file while it is open. What
// it reads it keeps in known (settle: after waiting for a file just written,
// settleStamp, so that it is kept).
func (h *Host) hashOne(s *session, st *cachefs.Stater, c candidate, put stage, known *Prepared, settle bool) (*ledger.Entry, error) {
	f, err := st.Open(c.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return &ledger.Entry{}, nil
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENAMETOOLONG) {
		return nil, &unreadableError{err}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var before fs.FileInfo
	if known != nil {
		defer known.hold(c.rel)()
		if before, err = f.Stat(); err != nil {
			return nil, fmt.Errorf("hash %s: %w", c.rel, err)
		}
		if e, ok := known.lookup(c.rel, before); ok {
			return h.changeOf(s, c, e.SHA256, e.Size, f, nil, put)
		}
		if settle {
			if before, err = settleStamp(f, before); err != nil {
				return nil, fmt.Errorf("hash %s: %w", c.rel, err)
			}
		}
	}
	start := time.Now()
	h.hashed.Add(1)
	var body []byte
	var d ledger.Digest
	var n int64
	if c.fi.Size < smallFile {
		var buf []byte
		if c.fi.Size < pooledBody {
			bp := bodyBufs.Get().(*[]byte)
			defer bodyBufs.Put(bp)
			buf = *bp
		} else {
			buf = make([]byte, c.fi.Size+pooledBody) // room to find it grew
		}
		body, err = readSmall(f, buf)
		if errors.Is(err, errNotSmall) {
			body = nil
		} else if err != nil {
			return nil, fmt.Errorf("hash %s: %w", c.rel, err)
		} else {
			d, n = ledger.DigestOf(body), int64(len(body))
		}
	}
	if body == nil {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("hash %s: %w", c.rel, err)
		}
		if d, n, err = cachefs.HashReader(f); err != nil {
			return nil, fmt.Errorf("hash %s: %w", c.rel, err)
		}
	}
	if known != nil {
		if after, err := f.Stat(); err == nil {
			known.record(c.rel, before, after, start, ledger.Entry{Path: c.rel, SHA256: d, Size: n, Mode: c.fi.Mode})
		}
	}
	return h.changeOf(s, c, d, n, f, body, put)
}

// changeOf is the end of hashOne, once the file's content is known to be d,
// of n bytes (body: its content, read whole, or nil).
func (h *Host) changeOf(s *session, c candidate, d ledger.Digest, n int64, f *os.File, body []byte, put stage) (*ledger.Entry, error) {
	if c.ok && c.row.Digest == d && c.row.Size == n && c.row.Mode == c.fi.Mode {
		return nil, nil // touched, same content
	}
	if j, jok := s.journal[c.rel]; jok && j.Matches(true, d) {
		return nil, nil // left by an interrupted apply: the ledger's content, not ours
	}
	e := ledger.Entry{Path: c.rel, SHA256: d, Size: n, Mode: c.fi.Mode}
	if put != nil {
		if body == nil {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("read %s: %w", c.rel, err)
			}
		}
		if err := put(e, f, body); err != nil {
			return nil, err
		}
	}
	return &e, nil
}

// unreadableError: hashOne cannot open a file the walk found (its
// permissions): the scan leaves it out, not synced, instead of failing.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return e.err.Error() }

// pooledBody is the size of bodyBufs' buffers: files below it (most of a
// swamp datastore's) are read into a pooled buffer, larger small files into
// one of their own.
const pooledBody = 64 << 10

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, pooledBody); return &b }}

// errNotSmall: the file holds more than the buffer (it grew since the walk).
var errNotSmall = errors.New("not a small file")

// readSmall reads f to its end into buf, or fails with errNotSmall if it
// does not fit.
func readSmall(f *os.File, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(f, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	return nil, errNotSmall // full: there may be more
}

// indexed calls fn for each index row at or under the paths of changed (a
// path stands for itself and its subtree; nil or "" or "." for the whole
// index), once each: what a scan limited to changed covers, read from the
// database without the rows it does not cover. enter, when not nil, is the
// walk's directory filter (partitions.enter): the rows of a directory it
// refuses are not read either (statedb.DB.ForEachEntered), so a commit of a
// few partitions reads their rows, not the whole index's.
func (h *Host) indexed(changed []string, enter func(dir string) bool, fn func(path string, row statedb.Entry)) error {
	each := func(p string, row statedb.Entry) (bool, error) { fn(p, row); return true, nil }
	roots := make([]string, 0, len(changed))
	for _, c := range changed {
		c = strings.Trim(c, "/")
		if c == "" || c == "." {
			changed = nil
			break
		}
		roots = append(roots, c)
	}
	if changed == nil {
		return h.rows.ForEachEntered("", enter, each)
	}
	// Drop the paths under another one: their rows are that one's.
	set := make(map[string]bool, len(roots))
	for _, r := range roots {
		set[r] = true
	}
	roots = slices.DeleteFunc(roots, func(r string) bool {
		for i := strings.LastIndexByte(r, '/'); i > 0; i = strings.LastIndexByte(r[:i], '/') {
			if set[r[:i]] {
				return true
			}
		}
		return false
	})
	slices.Sort(roots)
	roots = slices.Compact(roots)
	for _, r := range roots {
		row, ok, err := h.rows.Get(r)
		if err != nil {
			return err
		}
		if ok {
			fn(r, row)
		}
		if err := h.rows.ForEachEntered(r+"/", enter, each); err != nil {
			return err
		}
	}
	return nil
}

// partitions limits a scan to some partitions (CommitOptions.Partitions);
// the zero value keeps all.
type partitions struct {
	set    map[string]bool
	sorted []string
}

func partitionFilter(parts []string) partitions {
	if len(parts) == 0 {
		return partitions{}
	}
	p := partitions{set: make(map[string]bool, len(parts)), sorted: slices.Sorted(slices.Values(parts))}
	for _, k := range parts {
		p.set[k] = true
	}
	return p
}

func (p partitions) keep(partition string) bool { return p.set == nil || p.set[partition] }

// enter is the walk's directory filter (cachefs.Dir.ScanWith): nil when
// every partition is kept, else a directory is entered only when it can hold
// a file of a kept partition (ledger.PartitionsUnder), so that a commit of a
// few partitions does not walk the whole cache.
func (p partitions) enter() func(dir string) bool {
	if p.set == nil {
		return nil
	}
	return func(dir string) bool {
		exact, prefix, any := ledger.PartitionsUnder(dir)
		if any || slices.ContainsFunc(exact, p.keep) {
			return true
		}
		if prefix == "" {
			return false
		}
		i, _ := slices.BinarySearch(p.sorted, prefix)
		return i < len(p.sorted) && strings.HasPrefix(p.sorted[i], prefix)
	}
}

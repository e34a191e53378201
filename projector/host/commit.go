package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/ignore"
	"github.com/syncledger/syncledger/projector/statedb"
)

// CommitOptions describe a commit.
type CommitOptions struct {
	Message string
	// Partitions, when set, limits the commit to files of these partitions.
	Partitions []string
	// MaxAttempts bounds retries after chain conflicts; 0 means 20.
	MaxAttempts int
	// Stored lists content a Prepare of this Host already put in the blob
	// store; the commit does not upload it again.
	Stored map[ledger.Digest]bool
	// Paths, when set, limits the commit to these paths (resolve --mine).
	Paths []string
	// Changed, when not nil, limits the scan to these paths (slash-separated,
	// relative to the cache; a directory stands for its whole subtree): the
	// caller vouches that no other path changed since the cache was last scanned
	// whole, as a trusted dirty set does (package dirty). Empty means nothing
	// changed: the commit reads no index. Nil scans the whole cache.
	Changed []string
}

// CommitResult says what a commit did. A change of more partitions than one
// commit holds is published as several (Commit): the counts are their sums.
type CommitResult struct {
	Nothing    bool         `json:"nothing"`           // nothing to commit: no event published
	Commit     string       `json:"commit,omitempty"`  // the last commit published
	Commits    []CommitPart `json:"commits,omitempty"` // every commit published, in order: one unless the change was split
	Seqs       []ledger.Seq `json:"seqs,omitempty"`
	Partitions []string     `json:"partitions,omitempty"`
	Written    int          `json:"written"`
	Deleted    int          `json:"deleted"`
	Bytes      int64        `json:"bytes"`
	Attempts   int          `json:"attempts"`
	Pulled     int          `json:"pulled"` // remote events applied while resolving conflicts
	HWM        ledger.Seq   `json:"hwm"`
	Paths      []string     `json:"paths,omitempty"`
}

// CommitPart is one commit a Commit published: an atomic batch, at
// consecutive seqs.
type CommitPart struct {
	Commit     string       `json:"commit"`
	Seqs       []ledger.Seq `json:"seqs"`
	Partitions int          `json:"partitions"`
	Written    int          `json:"written"`
	Deleted    int          `json:"deleted"`
}

// scanned is the result of comparing the cache with the index.
type scanned struct {
	changes []ledger.Entry              // sorted by path
	infos   map[string]cachefs.FileInfo // what the scan saw of each changed file
	ignored []string                    // paths the ignore rules leave out (directories end in /)
	// unsynced: the paths the scan could not take (cachefs.Skipped, not
	// ignored), each warned of: nothing at or below them is a change.
	unsynced map[string]bool
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
func (h *Host) scan(s *session, keep func(partition string) bool, changed []string, put stage) (scanned, error) {
	out := scanned{infos: map[string]cachefs.FileInfo{}, unsynced: map[string]bool{}}
	var mu sync.Mutex // guards out.unsynced against hashOne's goroutines
	notSynced := func(path string, reason any) {
		h.log.Warn("not synced", "path", path, "reason", reason)
		mu.Lock()
		out.unsynced[strings.TrimSuffix(path, "/")] = true
		mu.Unlock()
	}
	ign, err := h.dir.Ignore()
	if err != nil {
		return out, err
	}
	walk := func(fn func(string, cachefs.FileInfo) error, skip func(cachefs.Skipped)) error {
		return h.dir.ScanWith(ign, fn, skip)
	}
	if changed != nil {
		walk = func(fn func(string, cachefs.FileInfo) error, skip func(cachefs.Skipped)) error {
			return h.dir.ScanPaths(ign, changed, fn, skip)
		}
	}
	// The files the index does not vouch for are hashed (and staged) while the
	// walk goes on, h.cfg.Parallel at a time.
	seen := map[string]bool{}
	var cands []*candidate
	st := h.dir.NewStater()
	var g errgroup.Group
	g.SetLimit(h.cfg.Parallel)
	err = walk(func(rel string, fi cachefs.FileInfo) error {
		part := ledger.PartitionKey(rel)
		if !keep(part) {
			return nil
		}
		if err := ledger.CheckPartitionToken(part); err != nil {
			// No event can carry this partition: leave the file out, never the others.
			notSynced(rel, err)
			return nil
		}
		seen[rel] = true
		row, ok, err := h.db.Get(rel)
		if err != nil {
			return err
		}
		if ok && !row.Lazy && row.Size == fi.Size && row.Mode == fi.Mode && row.MTime.Equal(fi.ModTime) {
			return nil
		}
		c := &candidate{rel: rel, fi: fi, row: row, ok: ok}
		cands = append(cands, c)
		st.Walked(rel)
		g.Go(func() (err error) {
			c.found, err = h.hashOne(s, st, *c, put)
			var ue *unreadableError
			if errors.As(err, &ue) {
				notSynced(c.rel, ue.err)
				c.found, err = nil, nil
			}
			return err
		})
		return nil
	}, func(sk cachefs.Skipped) {
		if sk.Ignored {
			out.ignored = append(out.ignored, sk.Path)
			return
		}
		notSynced(sk.Path, sk.Reason)
	})
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return out, fmt.Errorf("scan cache: %w", err)
	}
	for _, c := range cands {
		switch e := c.found; {
		case e == nil:
		case e.Path == "":
			delete(seen, c.rel) // removed while we walked
		default:
			fi := c.fi
			fi.Size = e.Size
			out.infos[c.rel] = fi
			out.changes = append(out.changes, *e)
		}
	}
	// The indexed paths the scan covers and did not see are deletions. A
	// shadowed file absent from the cache is not a deletion: a directory of
	// its name holds other paths (projector.OpShadow).
	var gone []string
	err = h.indexed(changed, func(p string, row statedb.Entry) {
		if j, jok := s.journal[p]; jok && j.Matches(false, ledger.Digest{}) {
			return // removed by an interrupted apply, not by this host's user
		}
		if !seen[p] && !row.Lazy && keep(ledger.PartitionKey(p)) && !ign.Ignored(p) && !cachefs.Unsynced(out.unsynced, p) {
			gone = append(gone, p)
		}
	})
	if err != nil {
		return out, fmt.Errorf("scan cache: %w", err)
	}
	for _, p := range gone {
		shadowed, err := s.core.Shadowed(p)
		if err != nil {
			return out, fmt.Errorf("scan cache: %w", err)
		}
		if !shadowed {
			out.changes = append(out.changes, ledger.Entry{Path: p, Deleted: true})
		}
	}
	sort.Slice(out.changes, func(i, j int) bool { return out.changes[i].Path < out.changes[j].Path })
	return out, nil
}

// hashOne hashes one candidate, reading the file once: whole into a pooled
// buffer when it is small, streamed otherwise. It returns the entry of its
// change: nil when its content is the index's (touched) or an interrupted
// apply's, an entry with an empty Path when the file is gone. put, when set,
// stages a changed file while it is open.
func (h *Host) hashOne(s *session, st *cachefs.Stater, c candidate, put stage) (*ledger.Entry, error) {
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
// database without the rows it does not cover.
func (h *Host) indexed(changed []string, fn func(path string, row statedb.Entry)) error {
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
		return h.db.ForEachPrefix("", each)
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
		row, ok, err := h.db.Get(r)
		if err != nil {
			return err
		}
		if ok {
			fn(r, row)
		}
		if err := h.db.ForEachPrefix(r+"/", each); err != nil {
			return err
		}
	}
	return nil
}

func partitionFilter(parts []string) func(string) bool {
	if len(parts) == 0 {
		return func(string) bool { return true }
	}
	return func(p string) bool { return slices.Contains(parts, p) }
}

// Commit publishes the cache's changes: one commit, all or nothing, when they
// touch at most Config.CommitPartitions partitions (ledger.MaxBatch, the most
// one JetStream atomic batch holds, unless set lower); more are published as
// consecutive commits of at most that many partitions each, in partition order (batches), each one atomic on its own and
// recorded before the next is built, sharing the message with "(part i of n)"
// appended. Chain conflicts are retried per commit as for a single one (up to
// MaxAttempts each). An error after some of them were published leaves those
// published and recorded, and the rest of the changes uncommitted in the cache:
// the next Commit publishes them; the result lists the commits published.
func (h *Host) Commit(ctx context.Context, opt CommitOptions) (CommitResult, error) {
	release, aerr := h.acquire()
	if aerr != nil {
		return CommitResult{}, aerr
	}
	defer release()
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 20
	}
	if slices.Contains(opt.Changed, ignore.FileName) {
		// New ignore rules change what every path's scan says, with no event
		// for those paths.
		opt.Changed = nil
	}
	if opt.Changed != nil && len(opt.Changed) == 0 {
		// Nothing changed since the last full scan: no index to load.
		_, _, hwm, err := h.checkLineage(ctx)
		if err != nil {
			return CommitResult{}, err
		}
		return CommitResult{Nothing: true, HWM: hwm, Attempts: 1}, nil
	}
	s, err := h.load(ctx, false)
	if err != nil {
		return CommitResult{}, err
	}
	res, err := h.commit(ctx, s, opt)
	slices.Sort(res.Paths) // Partitions stay in Seqs' order, one for one
	if err != nil && len(res.Commits) > 0 {
		err = &PartialCommitError{Published: res.Commits, Err: err}
	}
	return res, err
}

// commit is Commit's loop: scan, publish each batch of the changes, and on a
// chain conflict catch up with the batch's partitions and scan again.
func (h *Host) commit(ctx context.Context, s *session, opt CommitOptions) (CommitResult, error) {
	keep := partitionFilter(opt.Partitions)
	var res CommitResult
	put := h.commitStage(ctx, opt.Stored)
	for attempt := 1; ; attempt++ {
		res.Attempts++
		sc, err := h.scan(s, keep, opt.Changed, put)
		if err != nil {
			return res, err
		}
		if len(opt.Paths) > 0 {
			sc.changes = slices.DeleteFunc(sc.changes, func(e ledger.Entry) bool { return !slices.Contains(opt.Paths, e.Path) })
		}
		if len(sc.changes) == 0 {
			res.Nothing, res.HWM = len(res.Commits) == 0, s.core.HWM()
			return res, nil
		}
		h.fp.at("commit-after-scan")
		bs := batches(sc.changes, h.cfg.CommitPartitions)
		n := len(res.Commits) + len(bs)
		var changes []ledger.Entry // the batch the chain moved under
		for _, b := range bs {
			msg := opt.Message
			if n > 1 {
				msg = PartMessage(opt.Message, len(res.Commits)+1, n)
			}
			err = h.publish(ctx, s, scanned{changes: b, infos: sc.infos}, msg, &res)
			var ce *ledger.ConflictError
			if errors.As(err, &ce) {
				if attempt >= opt.MaxAttempts {
					return res, fmt.Errorf("commit: gave up after %d attempts: %w", attempt, err)
				}
				h.log.Info("chain moved, syncing touched partitions", "partition", ce.Partition, "attempt", attempt)
				changes = b
				break
			}
			if err != nil {
				return res, err
			}
			attempt = 1 // each commit has its own MaxAttempts
		}
		if changes == nil {
			return res, nil
		}
		if err := h.catchUp(ctx, s, changes, &res); err != nil {
			return res, err
		}
		// Backoff of attempt × 1–7 ms, the factor taken from the clock's
		// nanoseconds: the jitter keeps two hosts fighting over one partition
		// from retrying in lockstep.
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Duration(attempt*(1+int(h.cfg.Now().UnixNano()%7))) * time.Millisecond):
		}
	}
}

// batches splits changes (sorted by path) into the changes of consecutive runs
// of at most limit partitions, in partition order, each sorted by
// path: the commits a change too wide for one atomic batch is published as.
// A partition is never split between two of them.
func batches(changes []ledger.Entry, limit int) [][]ledger.Entry {
	byPart := map[string][]ledger.Entry{}
	for _, e := range changes {
		p := ledger.PartitionKey(e.Path)
		byPart[p] = append(byPart[p], e)
	}
	if len(byPart) <= limit {
		return [][]ledger.Entry{changes}
	}
	var out [][]ledger.Entry
	for parts := range slices.Chunk(slices.Sorted(maps.Keys(byPart)), limit) {
		var b []ledger.Entry
		for _, p := range parts {
			b = append(b, byPart[p]...)
		}
		slices.SortFunc(b, func(x, y ledger.Entry) int { return strings.Compare(x.Path, y.Path) })
		out = append(out, b)
	}
	return out
}

// PartMessage is the message of commit i of n that one commit's changes were
// split into (Commit): the message with "(part i of n)" appended.
func PartMessage(msg string, i, n int) string {
	if msg == "" {
		return fmt.Sprintf("(part %d of %d)", i, n)
	}
	return fmt.Sprintf("%s (part %d of %d)", msg, i, n)
}

// PartialCommitError is a Commit that failed after publishing some of the
// commits its changes were split into: those are published and recorded, the
// rest of the changes are still uncommitted in the cache.
type PartialCommitError struct {
	Published []CommitPart // the commits published, in order
	Err       error        // the failure
}

func (e *PartialCommitError) Error() string {
	ids := make([]string, len(e.Published))
	for i, p := range e.Published {
		ids[i] = p.Commit
	}
	return fmt.Sprintf("%v (published before it, of the same change: %s; the rest of the change stays uncommitted in the cache: commit again once this is fixed)",
		e.Err, strings.Join(ids, ", "))
}

func (e *PartialCommitError) Unwrap() error { return e.Err }

// publish uploads the changed content, appends the events of one commit and
// records them, adding the commit to res.
func (h *Host) publish(ctx context.Context, s *session, sc scanned, msg string, res *CommitResult) error {
	now := h.cfg.Now()
	id, err := ledger.NewCommitID(h.cfg.Rand)
	if err != nil {
		return err
	}
	c := ledger.Commit{ID: id, Host: h.cfg.Host, At: now, Message: msg, Entries: sc.changes}
	events, err := s.core.CommitEvents(c)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := h.syncCommitted(sc); err != nil {
		return err
	}
	// The content is stored (the scan's stage) and the files are durable:
	// publish, the manifests first.
	seqs, err := ledger.Publish(ctx, h.fp.log(h.cfg.Log), h.cfg.Blobs, events)
	if err != nil {
		return err
	}
	h.fp.at("commit-after-append")
	if err := s.core.RecordOwn(events, seqs); err != nil {
		return fmt.Errorf("record commit %s (published at seqs %v): %w", id, seqs, err)
	}
	flushed := make(map[string]bool, len(sc.changes))
	for _, e := range sc.changes {
		flushed[e.Path] = true
	}
	rd, err := s.core.Ready()
	if err == nil {
		_, err = h.applyOwn(ctx, s, rd, sc.infos, flushed)
	}
	if err != nil {
		return fmt.Errorf("record commit %s (published at seqs %v): %w", id, seqs, err)
	}
	h.fp.at("commit-after-persist")
	part := CommitPart{Commit: id, Seqs: seqs, Partitions: len(events)}
	for _, e := range sc.changes {
		res.Paths = append(res.Paths, e.Path)
		if e.Deleted {
			part.Deleted++
		} else {
			part.Written++
			res.Bytes += e.Size
		}
	}
	for _, ev := range events {
		res.Partitions = append(res.Partitions, ev.Partition)
	}
	res.Commit, res.HWM = id, s.core.HWM()
	res.Commits = append(res.Commits, part)
	res.Seqs = append(res.Seqs, seqs...)
	res.Written += part.Written
	res.Deleted += part.Deleted
	return nil
}

// syncCommitted makes the commit's files (and the deleted files' absence)
// durable before anything is published: the ledger must never hold content this
// cache could lose in a power cut, or, after one, the next scan would find the
// older or truncated file, take it for a local change and publish it over the
// good version on every host. The scan's stage fsynced each changed file's
// content (commitStage); this syncs the directories on every path.
func (h *Host) syncCommitted(sc scanned) error {
	paths := make([]string, len(sc.changes))
	for i, e := range sc.changes {
		paths[i] = e.Path
	}
	if err := h.dir.Flush(nil, paths, h.cfg.Parallel); err != nil {
		return fmt.Errorf("commit: sync the committed files: %w", err)
	}
	return nil
}

// commitStage is a commit's stage of each changed file, done while the scan
// holds it open: its content is made durable (fsync: the ledger must never
// hold content this cache could lose, see syncCommitted) and stored in the
// blob store, unless stored says a Prepare stored it. A blob stored for a
// commit that is then not published is garbage that blob GC collects.
func (h *Host) commitStage(ctx context.Context, stored map[ledger.Digest]bool) stage {
	return func(e ledger.Entry, f *os.File, body []byte) error {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("commit: sync %s: %w", e.Path, err)
		}
		if stored[e.SHA256] {
			return nil
		}
		return h.putContent(ctx, e, f, body)
	}
}

// prepareStage stores each changed file's content (Prepare): durability is
// the Commit's to ensure.
func (h *Host) prepareStage(ctx context.Context) stage {
	return func(e ledger.Entry, f *os.File, body []byte) error { return h.putContent(ctx, e, f, body) }
}

// putContent stores e's content: body when the scan read it whole, else f,
// read again from its start and verified against e's digest while it is
// sent (a file changed since it was hashed fails with ErrChecksum: nothing is
// published).
func (h *Host) putContent(ctx context.Context, e ledger.Entry, f *os.File, body []byte) error {
	var r io.Reader = f
	if body != nil {
		r = bytes.NewReader(body)
	}
	if err := h.cfg.Blobs.Put(ctx, e.SHA256, r, e.Size); err != nil {
		if errors.Is(err, ledger.ErrChecksum) {
			return fmt.Errorf("upload %s: the file changed while committing; commit again: %w", e.Path, err)
		}
		return fmt.Errorf("upload %s: %w", e.Path, err)
	}
	return nil
}

// PrepareResult says what a Prepare uploaded.
type PrepareResult struct {
	Files  int                    `json:"files"` // changed paths found (deletions included)
	Bytes  int64                  `json:"bytes"`
	Paths  []string               `json:"paths,omitempty"`
	Stored map[ledger.Digest]bool `json:"-"` // for CommitOptions.Stored
}

// Prepare is the first half of a two-phase commit: it scans the cache like
// Commit and uploads the changed content, publishing nothing. A Commit right
// after it, given the result's Stored, then only appends the events — the
// short step a caller runs under a global lock (swamp's commitPush).
//
// changed is CommitOptions.Changed: nil scans the whole cache.
func (h *Host) Prepare(ctx context.Context, partitions, changed []string) (PrepareResult, error) {
	release, aerr := h.acquire()
	if aerr != nil {
		return PrepareResult{}, aerr
	}
	defer release()
	s, err := h.load(ctx, false)
	if err != nil {
		return PrepareResult{}, err
	}
	sc, err := h.scan(s, partitionFilter(partitions), changed, h.prepareStage(ctx))
	if err != nil {
		return PrepareResult{}, err
	}
	res := PrepareResult{Files: len(sc.changes), Stored: map[ledger.Digest]bool{}}
	for _, e := range sc.changes {
		res.Paths = append(res.Paths, e.Path)
		if !e.Deleted {
			res.Bytes += e.Size
			res.Stored[e.SHA256] = true
		}
	}
	return res, nil
}

// catchUp reads the new events of the partitions the local changes touch. If one
// of them changes a locally changed path to other content, it stops with a
// *ConflictError; otherwise it applies them (scoped: the HWM does not move).
func (h *Host) catchUp(ctx context.Context, s *session, changes []ledger.Entry, res *CommitResult) error {
	sr := SyncResult{}
	r := &run{h: h, s: s, res: &sr}
	recs, err := h.partitionTails(ctx, r, changes)
	if err != nil {
		return err
	}
	if conflicts := projector.Conflicts(changes, recs); len(conflicts) > 0 {
		return &ConflictError{Paths: conflicts}
	}
	for _, rec := range recs {
		if err := r.offer(ctx, projector.Scoped, rec); err != nil {
			return err
		}
	}
	if err := r.flush(ctx); err != nil {
		return err
	}
	res.Pulled += sr.Applied
	return nil
}

// partitionTails is the one catch-up read of a partition: the events of the
// partitions of changes that this host has not read (after each one's mark),
// partition by partition in key order, each resolved (its manifest read) by
// r. A partition whose last seq is at its mark is not read.
func (h *Host) partitionTails(ctx context.Context, r *run, changes []ledger.Entry) ([]ledger.Record, error) {
	parts := map[string]bool{}
	for _, e := range changes {
		parts[ledger.PartitionKey(e.Path)] = true
	}
	var recs []ledger.Record
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		mk, err := r.s.core.Mark(p)
		if err != nil {
			return nil, err
		}
		last, err := h.cfg.Log.PartitionLastSeq(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("read last seq of partition %q: %w", p, err)
		}
		if last <= mk.Seq {
			continue
		}
		err = h.cfg.Log.ReadPartition(ctx, p, mk.Seq+1, func(rec ledger.Record) error {
			if err := r.resolve(ctx, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return nil, needsRebuild(fmt.Errorf("read partition %q: %w", p, err))
		}
	}
	return recs, nil
}

package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
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

// CommitResult says what a commit did.
type CommitResult struct {
	Nothing    bool         `json:"nothing"` // nothing to commit: no event published
	Commit     string       `json:"commit,omitempty"`
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

// scanned is the result of comparing the cache with the index.
type scanned struct {
	changes []ledger.Entry              // sorted by path
	infos   map[string]cachefs.FileInfo // what the scan saw of each changed file
	ignored []string                    // paths the ignore rules leave out (directories end in /)
}

// scan compares the cache with the index: size, mtime and mode first, SHA-256 for
// files that differ. A lazy file absent from the cache is not a deletion, nor is
// an ignored one (package ignore): ignored paths are neither committed nor
// deleted.
//
// changed, when not nil, limits the scan to those paths and their subtrees
// (CommitOptions.Changed).
func (h *Host) scan(s *session, keep func(partition string) bool, changed []string) (scanned, error) {
	out := scanned{infos: map[string]cachefs.FileInfo{}}
	ign, err := h.dir.Ignore()
	if err != nil {
		return out, err
	}
	walk := h.dir.Scan
	if changed != nil {
		walk = func(fn func(string, cachefs.FileInfo) error, skip func(cachefs.Skipped)) error {
			return h.dir.ScanPaths(changed, fn, skip)
		}
	}
	seen := map[string]bool{}
	err = walk(func(rel string, fi cachefs.FileInfo) error {
		part := ledger.PartitionKey(rel)
		if !keep(part) {
			return nil
		}
		if err := ledger.CheckPartitionToken(part); err != nil {
			// No event can carry this partition: leave the file out, never the others.
			h.log.Warn("not synced", "path", rel, "reason", err)
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
		d, n, err := h.dir.Hash(rel)
		if errors.Is(err, fs.ErrNotExist) {
			delete(seen, rel)
			return nil
		}
		if err != nil {
			return err
		}
		if ok && row.Digest == d && row.Size == n && row.Mode == fi.Mode {
			return nil // touched, same content
		}
		if j, jok := s.journal[rel]; jok && j.Matches(true, d) {
			return nil // left by an interrupted apply: the ledger's content, not ours
		}
		fi.Size = n
		out.infos[rel] = fi
		out.changes = append(out.changes, ledger.Entry{Path: rel, SHA256: d, Size: n, Mode: fi.Mode})
		return nil
	}, func(sk cachefs.Skipped) {
		if sk.Ignored {
			out.ignored = append(out.ignored, sk.Path)
			return
		}
		h.log.Warn("not synced", "path", sk.Path, "reason", sk.Reason)
	})
	if err != nil {
		return out, fmt.Errorf("scan cache: %w", err)
	}
	// The indexed paths the scan covers and did not see are deletions. A
	// shadowed file absent from the cache is not a deletion: a directory of
	// its name holds other paths (projector.OpShadow).
	var gone []string
	err = h.indexed(changed, func(p string, row statedb.Entry) {
		if j, jok := s.journal[p]; jok && j.Matches(false, ledger.Digest{}) {
			return // removed by an interrupted apply, not by this host's user
		}
		if !seen[p] && !row.Lazy && keep(ledger.PartitionKey(p)) && !ign.Ignored(p) {
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

// Commit publishes the cache's changes.
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
	keep := partitionFilter(opt.Partitions)
	var res CommitResult
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		sc, err := h.scan(s, keep, opt.Changed)
		if err != nil {
			return res, err
		}
		if len(opt.Paths) > 0 {
			sc.changes = slices.DeleteFunc(sc.changes, func(e ledger.Entry) bool { return !slices.Contains(opt.Paths, e.Path) })
		}
		if len(sc.changes) == 0 {
			res.Nothing, res.HWM = true, s.core.HWM()
			return res, nil
		}
		h.cfg.Failpoint("commit-after-scan")
		err = h.publish(ctx, s, sc, opt, &res)
		var ce *ledger.ConflictError
		if !errors.As(err, &ce) {
			return res, err
		}
		if attempt >= opt.MaxAttempts {
			return res, fmt.Errorf("commit: gave up after %d attempts: %w", attempt, err)
		}
		h.log.Info("chain moved, syncing touched partitions", "partition", ce.Partition, "attempt", attempt)
		if err := h.catchUp(ctx, s, sc.changes, &res); err != nil {
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

// publish uploads the changed content, appends the events and records them.
func (h *Host) publish(ctx context.Context, s *session, sc scanned, opt CommitOptions, res *CommitResult) error {
	now := h.cfg.Now()
	id, err := ledger.NewCommitID(h.cfg.Rand)
	if err != nil {
		return err
	}
	c := ledger.Commit{ID: id, Host: h.cfg.Host, At: now, Message: opt.Message, Entries: sc.changes}
	events, err := s.core.CommitEvents(c)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := h.syncCommitted(sc); err != nil {
		return err
	}
	if err := h.upload(ctx, sc, opt.Stored); err != nil {
		return err
	}
	wire := make([]ledger.Event, len(events))
	for i, ev := range events {
		w, manifest, err := ledger.Externalize(ev)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if manifest != nil {
			if _, err := ledger.PutBytes(ctx, h.cfg.Blobs, manifest); err != nil {
				return fmt.Errorf("commit: store manifest of %q: %w", ev.Partition, err)
			}
		}
		wire[i] = w
	}
	h.cfg.Failpoint("commit-after-upload")
	seqs, err := h.cfg.Log.Append(ctx, wire)
	if err != nil {
		return err
	}
	h.cfg.Failpoint("commit-after-append")
	if err := s.core.RecordOwn(events, seqs); err != nil {
		return fmt.Errorf("record commit %s (published at seqs %v): %w", id, seqs, err)
	}
	rd, err := s.core.Ready()
	if err == nil {
		// The commit's own files were made durable above (syncCommitted).
		_, err = h.apply(ctx, s, rd, applyOptions{seen: sc.infos, flushed: true})
	}
	if err != nil {
		return fmt.Errorf("record commit %s (published at seqs %v): %w", id, seqs, err)
	}
	h.cfg.Failpoint("commit-after-persist")
	res.Commit, res.Seqs, res.HWM = id, seqs, s.core.HWM()
	res.Partitions = res.Partitions[:0]
	for _, ev := range events {
		res.Partitions = append(res.Partitions, ev.Partition)
	}
	res.Written, res.Deleted, res.Bytes, res.Paths = 0, 0, 0, nil
	for _, e := range sc.changes {
		res.Paths = append(res.Paths, e.Path)
		if e.Deleted {
			res.Deleted++
		} else {
			res.Written++
			res.Bytes += e.Size
		}
	}
	return nil
}

// syncCommitted makes the commit's files (and the deleted files' absence)
// durable before anything is published: the ledger must never hold content this
// cache could lose in a power cut, or, after one, the next scan would find the
// older or truncated file, take it for a local change and publish it over the
// good version on every host.
func (h *Host) syncCommitted(sc scanned) error {
	var files, gone []string
	for _, e := range sc.changes {
		if e.Deleted {
			gone = append(gone, e.Path)
		} else {
			files = append(files, e.Path)
		}
	}
	if err := h.dir.Flush(files, gone, h.cfg.Parallel); err != nil {
		return fmt.Errorf("commit: sync the committed files: %w", err)
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
	sc, err := h.scan(s, partitionFilter(partitions), changed)
	if err != nil {
		return PrepareResult{}, err
	}
	if err := h.upload(ctx, sc, nil); err != nil {
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

// upload stores every changed file's content, in parallel, except content in
// stored. A file that changes while it is read fails the commit with
// ErrChecksum: nothing was published.
func (h *Host) upload(ctx context.Context, sc scanned, stored map[ledger.Digest]bool) error {
	var g errgroup.Group
	g.SetLimit(h.cfg.Parallel)
	for _, e := range sc.changes {
		if e.Deleted || stored[e.SHA256] {
			continue
		}
		g.Go(func() error { return h.uploadOne(ctx, e) })
	}
	return g.Wait()
}

func (h *Host) uploadOne(ctx context.Context, e ledger.Entry) error {
	f, err := h.dir.Open(e.Path)
	if err != nil {
		return fmt.Errorf("upload %s: %w", e.Path, err)
	}
	defer f.Close()
	if err := h.cfg.Blobs.Put(ctx, e.SHA256, f, e.Size); err != nil {
		if errors.Is(err, ledger.ErrChecksum) {
			return fmt.Errorf("upload %s: the file changed while committing; commit again: %w", e.Path, err)
		}
		return fmt.Errorf("upload %s: %w", e.Path, err)
	}
	return nil
}

// catchUp reads the new events of the partitions the local changes touch. If one
// of them changes a locally changed path to other content, it stops with a
// *ConflictError; otherwise it applies them (scoped: the HWM does not move).
func (h *Host) catchUp(ctx context.Context, s *session, changes []ledger.Entry, res *CommitResult) error {
	parts := map[string]bool{}
	for _, e := range changes {
		parts[ledger.PartitionKey(e.Path)] = true
	}
	var recs []ledger.Record
	sr := SyncResult{}
	r := &run{h: h, s: s, res: &sr}
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		mk, err := s.core.Mark(p)
		if err != nil {
			return err
		}
		err = h.cfg.Log.ReadPartition(ctx, p, mk.Seq+1, func(rec ledger.Record) error {
			if err := r.resolve(ctx, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return needsRebuild(fmt.Errorf("read partition %q: %w", p, err))
		}
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

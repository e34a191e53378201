package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/ignore"
	"github.com/syncledger/syncledger/projector/statedb"
)

// applied counts what one Ready did to the cache.
type applied struct {
	Written, Deleted, Lazy, Indexed int
	Kept                            int // OpWrite files the cache held already
	Removed                         int // files removed from the cache by OpDelete
	Bytes                           int64
	Paths                           []string
}

// diskState is what the cache holds at a path, as far as the apply needs to know.
type diskState struct {
	// keep: an ignored file holding this host's own content where the ledger
	// has another: the apply leaves it as it is (see Host.ignored).
	keep   bool
	exists bool
	info   cachefs.FileInfo
	digest ledger.Digest // set when hashed
	hashed bool
}

// matches reports whether the disk holds the content of f (nil: absent).
func (d *diskState) matches(f *projector.File) bool {
	if f == nil {
		return !d.exists
	}
	return d.exists && d.hashed && d.digest == f.SHA256 && d.info.Size == f.Size && d.info.Mode == f.Mode
}

// inspect reads the disk state of path, hashing only when the index row does not
// already vouch for the file (same size, mtime and mode as when it was written).
// st is the pass's Stater (one per Ready).
func (h *Host) inspect(st *cachefs.Stater, path string, row statedb.Entry, hasRow bool) (diskState, error) {
	fi, err := st.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return diskState{}, nil
	}
	if err != nil {
		return diskState{}, err
	}
	ds := diskState{exists: true, info: fi}
	if hasRow && !row.Lazy && fi.Size == row.Size && fi.Mode == row.Mode && fi.ModTime.Equal(row.MTime) {
		ds.digest, ds.hashed = row.Digest, true
		return ds, nil
	}
	d, n, err := h.dir.Hash(path)
	if err != nil {
		return diskState{}, err
	}
	ds.digest, ds.hashed, ds.info.Size = d, true, n
	return ds, nil
}

// applyOptions are what some callers of apply add to a Ready.
type applyOptions struct {
	// seen gives, for files of the host's own commit (OpIndex), what the commit
	// scan saw; their index rows take that mtime, so a file changed after the
	// scan is hashed again by the next one.
	seen map[string]cachefs.FileInfo
	// progress, when set, is called after each file fetched (under a lock).
	progress func(applied)
	// flushed names paths the caller already made durable, content and
	// directories (the host's own commit: syncCommitted): the sync step skips
	// them.
	flushed map[string]bool
}

// applyReady performs rd on the cache, makes it durable, persists it in one
// transaction and advances the core (see apply).
func (h *Host) applyReady(ctx context.Context, s *session, rd projector.Ready, seen map[string]cachefs.FileInfo) (applied, error) {
	return h.apply(ctx, s, rd, applyOptions{seen: seen})
}

// applyOwn is applyReady for the Ready of the host's own commit, whose paths
// the commit made durable before publishing (flushed).
func (h *Host) applyOwn(ctx context.Context, s *session, rd projector.Ready, seen map[string]cachefs.FileInfo, flushed map[string]bool) (applied, error) {
	return h.apply(ctx, s, rd, applyOptions{seen: seen, flushed: flushed})
}

// apply performs rd in six steps, each its own function:
//
//  1. inspect: read what the cache holds at each path; if one holds a local
//     change (content matching neither the index nor the incoming state),
//     nothing is written, and the error names the paths;
//  2. journal: record durably what the Ready puts at each path, so a file an
//     interruption leaves is not taken for a local change;
//  3. remove: delete what must not stay (in order: removals drop the
//     directories they empty);
//  4. fetch: download and write the new content (bounded parallel);
//  5. sync: make durable everything rd.MustSync names — written files, files
//     found already right, removals, and the directories on their paths;
//  6. persist: one transaction for index rows, marks, HWM and lineage (and the
//     journal entries it clears); then the core advances.
//
// Nothing reaches the state before step 5 returns, so after a power cut the
// state never claims content the cache does not hold. On any error the Ready is
// discarded and the durable state is unchanged.
func (h *Host) apply(ctx context.Context, s *session, rd projector.Ready, opt applyOptions) (applied, error) {
	var out applied
	if err := h.applySteps(ctx, s, rd, opt, &out); err != nil {
		s.core.Discard()
		return out, err
	}
	s.core.Advance(rd)
	h.hwm.Store(uint64(rd.HWM))
	h.fp.at("sync-after-persist")
	sort.Strings(out.Paths)
	return out, nil
}

func (h *Host) applySteps(ctx context.Context, s *session, rd projector.Ready, opt applyOptions, out *applied) error {
	// One Stater for the pass: the fetch then knows the directories the
	// inspection checked — unless the removals changed them.
	st := h.dir.NewStater()
	disk, err := h.inspectReady(s, rd, st)
	var lc *LocalChangesError
	if errors.As(err, &lc) && h.keepDir != "" {
		// A rebuild of a damaged state: no index tells a local edit from an
		// older version of the ledger's. Each is kept aside (damage.go).
		if err = h.keepAside(lc.Paths); err == nil {
			st = h.dir.NewStater()
			disk, err = h.inspectReady(s, rd, st)
		}
	}
	if err != nil {
		return err
	}
	jid, err := h.journalReady(s, rd, disk)
	if err != nil {
		return err
	}
	h.fp.at("sync-before-write")
	rows, err := h.rowsOf(rd, disk, opt.seen, out)
	if err != nil {
		return err
	}
	removed, err := h.removeReady(rd, disk, out)
	if err != nil {
		return err
	}
	if removed > 0 {
		st = h.dir.NewStater() // removals drop the directories they empty
	}
	written := make([]bool, len(rd.Changes))
	if err := h.fetchReady(ctx, st, rd, disk, rows, written, opt.progress, out); err != nil {
		return err
	}
	if err := h.syncReady(rd, written, opt.flushed); err != nil {
		return err
	}
	h.fp.at("sync-after-write")
	return h.persistReady(s, rd, rows, jid)
}

// inspectReady reads the disk state of every path rd changes on disk (not
// OpIndex: the host's own commit, whose files are the cache's) and fails with a
// *LocalChangesError naming the paths that hold a local change.
//
// An ignored file (a swamp database, an editor's swap file) that would be a
// local change is this host's own: the index takes the ledger's row, the file
// stays as it is (diskState.keep). A path of the Forced rules (ignore.IsForced)
// is never inspected, written or removed at all.
//
// st is the pass's Stater.
func (h *Host) inspectReady(s *session, rd projector.Ready, st *cachefs.Stater) ([]diskState, error) {
	disk := make([]diskState, len(rd.Changes))
	var local []string
	for i, ch := range rd.Changes {
		if ch.Op == projector.OpIndex {
			continue
		}
		if ignore.IsForced(ch.Path) {
			// Never this host's to write or remove (a swamp database, a nested
			// cache's state), whoever published it: the disk is left alone.
			disk[i].keep = true
			continue
		}
		row, hasRow, err := h.rows.Get(ch.Path)
		if err != nil {
			return nil, fmt.Errorf("apply %s: %w", ch.Path, err)
		}
		ds, err := h.inspectChange(st, s, rd, ch, row, hasRow)
		if blocker, ok := blockedBy(err); ok {
			local = append(local, blocker)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("apply %s: %w", ch.Path, err)
		}
		disk[i] = ds
		oldOK := ds.matches(ch.Old) || (!ds.exists && ch.Old != nil && ch.Old.Lazy)
		switch {
		case oldOK || ds.matches(ch.New) || s.leftover(ch.Path, ds) || ds.ledgerLeft(ch):
		case !ds.exists && (ch.Op != projector.OpWrite || rd.Reset):
			// Absent where nothing must be, or a reset restoring it.
		case rd.Reset && ch.Op == projector.OpWrite && ch.Old != nil && !ch.Old.Lazy && ch.Old.SameContent(*ch.New):
			// A rebuild's restore of a file whose indexed version is the
			// snapshot's: its local edit conflicts with nothing the ledger
			// did. It stays, uncommitted, on top of the restored index, for a
			// commit to publish (issue 26 point 6: refusing it here sent the
			// host round a circle of ways out, commit → rebuild → commit).
			disk[i].keep = true
		default:
			ignored, err := h.ignored(ch.Path)
			if err != nil {
				return nil, err
			}
			if ignored {
				disk[i].keep = true
				continue
			}
			local = append(local, ch.Path)
		}
	}
	if len(local) > 0 {
		return nil, &LocalChangesError{Paths: local}
	}
	return disk, nil
}

// journalReady records durably what rd puts at each path before any is
// touched, so that a file it leaves behind if interrupted is not taken for a
// local change.
//
// A reset (a rebuild's restore) is recorded too (statedb SetRestoring): once it
// touched a file, only finishing it makes the cache and the state agree again.
func (h *Host) journalReady(s *session, rd projector.Ready, disk []diskState) (statedb.JournalID, error) {
	if rd.Reset {
		if err := h.db.SetRestoring(rd.HWM); err != nil {
			return 0, fmt.Errorf("journal restore: %w", err)
		}
	}
	var journal []statedb.JournalPath // in rd.Changes's order: by path
	for i, ch := range rd.Changes {
		switch {
		case disk[i].keep:
		case ch.Op == projector.OpWrite && !disk[i].matches(ch.New):
			journal = append(journal, statedb.JournalPath{Path: ch.Path, JournalEntry: statedb.JournalEntry{Digests: []ledger.Digest{ch.New.SHA256}}})
		case ch.Op != projector.OpWrite && ch.Op != projector.OpIndex && disk[i].exists:
			journal = append(journal, statedb.JournalPath{Path: ch.Path, JournalEntry: statedb.JournalEntry{Removed: true}})
		}
	}
	if len(journal) == 0 {
		return 0, nil
	}
	id, err := h.db.AddJournal(journal)
	if err != nil {
		return 0, fmt.Errorf("journal apply: %w", err)
	}
	for _, j := range journal {
		s.journal[j.Path] = j.JournalEntry
	}
	return id, nil
}

// rowsOf returns the index rows rd persists (rows[i] for rd.Changes[i]; zero
// where New is nil), with the mtimes known before any file is written, and
// counts the changes that need no fetch.
func (h *Host) rowsOf(rd projector.Ready, disk []diskState, seen map[string]cachefs.FileInfo, out *applied) ([]statedb.Entry, error) {
	rows := make([]statedb.Entry, len(rd.Changes))
	for i, ch := range rd.Changes {
		if ch.New != nil {
			rows[i] = statedb.Entry{Digest: ch.New.SHA256, Size: ch.New.Size, Mode: ch.New.Mode, Lazy: ch.New.Lazy, Seq: ch.Seq}
			if ch.Seq == 0 && !rd.Reset {
				old, _, err := h.rows.Get(ch.Path) // Hydrate: the event that wrote it
				if err != nil {
					return nil, err
				}
				rows[i].Seq = old.Seq
			}
		}
		switch {
		case disk[i].keep:
		case ch.Op == projector.OpWrite && disk[i].matches(ch.New):
			rows[i].MTime = disk[i].info.ModTime // already there (an interrupted apply)
			out.Kept++
		case ch.Op == projector.OpIndex:
			if fi, ok := seen[ch.Path]; ok && ch.New != nil && fi.Size == ch.New.Size && fi.Mode == ch.New.Mode {
				rows[i].MTime = fi.ModTime
			}
			out.Indexed++
		case ch.Op == projector.OpLazy:
			out.Lazy++
		case ch.Op == projector.OpDelete && ch.Old != nil:
			out.Deleted++
			out.Paths = append(out.Paths, ch.Path)
		}
	}
	return rows, nil
}

// removeReady removes the files of OpDelete, OpLazy and OpShadow changes that exist, in
// order (cachefs removes the directories it empties, which must not race with
// a fetch creating a file in one of them). It returns how many it removed.
func (h *Host) removeReady(rd projector.Ready, disk []diskState, out *applied) (int, error) {
	n := 0
	for i, ch := range rd.Changes {
		if (ch.Op != projector.OpDelete && ch.Op != projector.OpLazy && ch.Op != projector.OpShadow) || !disk[i].exists || disk[i].keep {
			continue
		}
		if err := h.dir.RemoveDeferred(ch.Path); err != nil {
			return n, err
		}
		n++
		if ch.Op == projector.OpDelete {
			out.Removed++
		}
	}
	return n, nil
}

// fetchReady fetches and writes, h.cfg.Parallel at a time, the content of the
// OpWrite changes the cache does not hold yet, sets their rows' mtimes, and
// sets written[i] for each file it wrote (its content fsynced before its
// rename: only its directories remain to sync). st is the pass's Stater: the
// Ready's files share most of their directories.
func (h *Host) fetchReady(ctx context.Context, st *cachefs.Stater, rd projector.Ready, disk []diskState, rows []statedb.Entry, written []bool, progress func(applied), out *applied) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(h.cfg.Parallel)
	for i, ch := range rd.Changes {
		if ch.Op != projector.OpWrite || disk[i].matches(ch.New) || disk[i].keep {
			continue
		}
		g.Go(func() error {
			fi, err := fetch(gctx, h.blobsPort(), st, ch.Path, ch.New)
			switch {
			case (errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrChecksum)) && ch.Seq == 0:
				// A hydration (Fetch) of a row applied earlier: no event is
				// read here, so no seq to blame (Fetch says what it means).
				return &ContentGoneError{Paths: []string{ch.Path}, Err: err}
			case errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrChecksum):
				// The event at ch.Seq names content the blob store does not
				// hold: a message an admin may quarantine.
				return &ledger.RecordError{Seq: ch.Seq, Err: fmt.Errorf("seq %d: %w", ch.Seq, err), Decoded: true}
			}
			if err != nil {
				return err
			}
			written[i] = true
			mu.Lock()
			defer mu.Unlock()
			rows[i].MTime = fi.ModTime
			out.Written++
			out.Bytes += fi.Size
			out.Paths = append(out.Paths, ch.Path)
			if progress != nil {
				progress(*out)
			}
			return nil
		})
	}
	return g.Wait()
}

// syncReady makes durable what rd.MustSync names, before any state claims it:
// the content of each file the fetch did not write itself (written: already
// fsynced), and the directories on every path, except the paths the caller
// flushed whole.
func (h *Host) syncReady(rd projector.Ready, written []bool, flushed map[string]bool) error {
	var files, gone []string
	for i, m := range rd.MustSync() {
		switch {
		case flushed[m.Path]:
		case m.Content && !written[i]:
			files = append(files, m.Path)
		default:
			gone = append(gone, m.Path) // its directories only
		}
	}
	if len(files)+len(gone) == 0 {
		return nil
	}
	if err := h.dir.Flush(files, gone, h.cfg.Parallel); err != nil {
		return fmt.Errorf("sync cache: %w", err)
	}
	return nil
}

// persistReady persists rd in one transaction — lineage, the index rows (a
// reset first empties the old state), the journal of its paths (its record,
// jid, and what earlier applies left there), marks and HWM — into the
// database the session's core reads.
func (h *Host) persistReady(s *session, rd projector.Ready, rows []statedb.Entry, jid statedb.JournalID) error {
	err := h.db.Update(func(tx *statedb.Tx) error {
		if rd.Reset {
			if err := tx.Reset(); err != nil {
				return err
			}
		}
		if rd.Ledger != "" {
			if err := tx.SetLedger(rd.Ledger, s.info.Name); err != nil {
				return err
			}
		}
		var journalled []string
		for _, ch := range rd.Changes {
			if _, ok := s.journal[ch.Path]; ok {
				journalled = append(journalled, ch.Path)
			}
		}
		if err := tx.ClearJournal(jid, journalled); err != nil {
			return err
		}
		for i, ch := range rd.Changes {
			var err error
			if ch.New == nil {
				err = tx.Delete(ch.Path)
			} else {
				err = tx.Put(ch.Path, rows[i])
			}
			if err != nil {
				return err
			}
		}
		for p, m := range rd.Marks {
			if err := tx.PutMark(p, m); err != nil {
				return err
			}
		}
		if err := s.persistCommits(tx, rd); err != nil {
			return err
		}
		return tx.SetHWM(rd.HWM)
	})
	if err != nil {
		return fmt.Errorf("persist state: %w", err)
	}
	for _, ch := range rd.Changes {
		delete(s.journal, ch.Path)
	}
	clear(s.commits) // every event staged was in rd
	return nil
}

// ignored reports whether path is left out by the cache's ignore rules. It is
// asked only of a path holding a local change, so the rules are read then.
func (h *Host) ignored(path string) (bool, error) {
	ign, err := h.dir.Ignore()
	if err != nil {
		return false, err
	}
	return ign.Ignored(path), nil
}

// leftover reports whether the disk holds what an interrupted apply journalled
// for path: not a local change.
func (s *session) leftover(path string, ds diskState) bool {
	j, ok := s.journal[path]
	return ok && (ds.hashed || !ds.exists) && j.Matches(ds.exists, ds.digest)
}

// fetch downloads f's blob and writes it at path in dir, verified, its content
// fsynced; the directories on its path are synced by the caller (Dir.Flush).
func fetch(ctx context.Context, blobs *ledger.Bucket, st *cachefs.Stater, path string, f *projector.File) (cachefs.FileInfo, error) {
	rc, err := blobs.Get(ctx, f.SHA256)
	if err != nil {
		return cachefs.FileInfo{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	defer rc.Close()
	fi, err := st.WriteDeferred(path, rc, f.SHA256, f.Size, f.Mode)
	if err != nil {
		return cachefs.FileInfo{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	return fi, nil
}

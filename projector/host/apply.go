package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"sort"
	"sync"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/statedb"
)

// applied counts what one Ready did to the cache.
type applied struct {
	Written, Deleted, Lazy, Indexed int
	Bytes                           int64
	Paths                           []string
}

func (a *applied) add(b applied) {
	a.Written += b.Written
	a.Deleted += b.Deleted
	a.Lazy += b.Lazy
	a.Indexed += b.Indexed
	a.Bytes += b.Bytes
	a.Paths = append(a.Paths, b.Paths...)
}

// diskState is what the cache holds at a path, as far as the apply needs to know.
type diskState struct {
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

// applyReady performs rd on the cache, persists it in one transaction and
// advances the core. Before touching anything it checks that no path holds a
// local change (content matching neither the index nor the incoming state); if
// one does, nothing is written, the Ready is discarded and the error names the
// paths.
//
// seen gives, for files of the host's own commit (OpIndex), what the commit scan
// saw; their index rows take that mtime, so a file changed after the scan is
// hashed again by the next one.
func (h *Host) applyReady(ctx context.Context, s *session, rd projector.Ready, seen map[string]cachefs.FileInfo) (applied, error) {
	var out applied
	disk := make([]diskState, len(rd.Changes))
	var local []string
	st := h.dir.NewStater()
	for i, ch := range rd.Changes {
		if ch.Op == projector.OpIndex {
			continue
		}
		row, hasRow := s.index[ch.Path]
		ds, err := h.inspectChange(st, rd, ch, row, hasRow)
		if blocker, ok := blockedBy(err); ok {
			local = append(local, blocker)
			continue
		}
		if err != nil {
			s.core.Discard()
			return out, fmt.Errorf("apply %s: %w", ch.Path, err)
		}
		disk[i] = ds
		oldOK := ds.matches(ch.Old) || (!ds.exists && ch.Old != nil && ch.Old.Lazy)
		if !oldOK && !ds.matches(ch.New) && !(ch.Op != projector.OpWrite && !ds.exists) && !s.leftover(ch.Path, ds) && !ds.ledgerLeft(ch) {
			local = append(local, ch.Path)
		}
	}
	if len(local) > 0 {
		s.core.Discard()
		return out, &LocalChangesError{Paths: local}
	}
	// Journal what this Ready puts at each path before touching any, so that a
	// file it leaves behind if interrupted is not taken for a local change.
	journal := map[string]statedb.JournalEntry{}
	for i, ch := range rd.Changes {
		switch {
		case ch.Op == projector.OpWrite && !disk[i].matches(ch.New):
			journal[ch.Path] = statedb.JournalEntry{Digests: []ledger.Digest{ch.New.SHA256}}
		case ch.Op != projector.OpWrite && ch.Op != projector.OpIndex && disk[i].exists:
			journal[ch.Path] = statedb.JournalEntry{Removed: true}
		}
	}
	if len(journal) > 0 {
		merged, err := h.db.AddJournal(journal)
		if err != nil {
			s.core.Discard()
			return out, fmt.Errorf("journal apply: %w", err)
		}
		maps.Copy(s.journal, merged)
	}
	h.cfg.Failpoint("sync-before-write")

	rows := make([]statedb.Entry, len(rd.Changes))
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, h.cfg.Parallel)
	)
	var fetches []int // started once the removals are done (see below)
	removed := false  // a removal awaits the flush
	for i, ch := range rd.Changes {
		if ch.New != nil {
			rows[i] = statedb.Entry{Digest: ch.New.SHA256, Size: ch.New.Size, Mode: ch.New.Mode, Lazy: ch.New.Lazy, Seq: ch.Seq}
			if ch.Seq == 0 {
				rows[i].Seq = s.index[ch.Path].Seq
			}
		}
		switch {
		case ch.Op == projector.OpWrite && disk[i].matches(ch.New):
			rows[i].MTime = disk[i].info.ModTime // already there (an interrupted apply)
		case ch.Op == projector.OpWrite:
			fetches = append(fetches, i)
		case ch.Op == projector.OpIndex:
			if fi, ok := seen[ch.Path]; ok && ch.New != nil && fi.Size == ch.New.Size && fi.Mode == ch.New.Mode {
				rows[i].MTime = fi.ModTime
			}
			out.Indexed++
		default: // OpDelete, OpLazy: the file must not stay
			if disk[i].exists {
				if err := h.dir.RemoveDeferred(ch.Path); err != nil {
					errs = append(errs, err)
					continue
				}
				removed = true
			}
			if ch.Op == projector.OpLazy {
				out.Lazy++
			} else if ch.Old != nil {
				out.Deleted++
				out.Paths = append(out.Paths, ch.Path)
			}
		}
	}
	// Fetches run after the removals: cachefs.Remove drops the directories it
	// empties, which must not race with a fetch creating a file in one of them,
	// and the counters are then only shared under mu.
	for _, i := range fetches {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, ch projector.Change) {
			defer func() { <-sem; wg.Done() }()
			fi, err := h.fetch(ctx, ch.Path, ch.New)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			rows[i].MTime = fi.ModTime
			out.Written++
			out.Bytes += fi.Size
			out.Paths = append(out.Paths, ch.Path)
		}(i, rd.Changes[i])
	}
	wg.Wait()
	if len(errs) == 0 && (out.Written > 0 || removed) {
		// One flush makes every file of this Ready durable before the state
		// that claims them is persisted.
		if err := h.dir.SyncAll(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.core.Discard()
		return out, errors.Join(errs...)
	}
	h.cfg.Failpoint("sync-after-write")

	err := h.db.Update(func(tx *statedb.Tx) error {
		if rd.Ledger != "" {
			if err := tx.SetLedger(rd.Ledger, s.info.Name); err != nil {
				return err
			}
		}
		for i, ch := range rd.Changes {
			if _, ok := s.journal[ch.Path]; ok {
				if err := tx.ClearJournal(ch.Path); err != nil {
					return err
				}
			}
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
		return tx.SetHWM(rd.HWM)
	})
	if err != nil {
		s.core.Discard()
		return out, fmt.Errorf("persist state: %w", err)
	}
	for i, ch := range rd.Changes {
		delete(s.journal, ch.Path)
		if ch.New == nil {
			delete(s.index, ch.Path)
		} else {
			s.index[ch.Path] = rows[i]
		}
	}
	if err := s.core.Advance(rd); err != nil {
		return out, err
	}
	h.hwm.Store(uint64(rd.HWM))
	h.cfg.Failpoint("sync-after-persist")
	sort.Strings(out.Paths)
	return out, nil
}

// leftover reports whether the disk holds what an interrupted apply journalled
// for path: not a local change.
func (s *session) leftover(path string, ds diskState) bool {
	j, ok := s.journal[path]
	return ok && (ds.hashed || !ds.exists) && j.Matches(ds.exists, ds.digest)
}

// fetch downloads f's blob and writes it at path, verified.
func (h *Host) fetch(ctx context.Context, path string, f *projector.File) (cachefs.FileInfo, error) {
	rc, err := h.cfg.Blobs.Get(ctx, f.SHA256)
	if err != nil {
		return cachefs.FileInfo{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	defer rc.Close()
	fi, err := h.dir.WriteDeferred(path, rc, f.SHA256, f.Size, f.Mode)
	if err != nil {
		return cachefs.FileInfo{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	return fi, nil
}

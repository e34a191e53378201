package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/snapshot"
	"github.com/syncledger/syncledger/projector/statedb"
)

// Progress reports a long operation (rebuild, replay) to a UI, which the shell
// does not have: files and bytes written, events read, with totals when known.
type Progress struct {
	Phase       string // "restore" (files from a snapshot) or "replay" (events)
	Files       int
	FilesTotal  int
	Bytes       int64
	BytesTotal  int64
	Events      uint64
	EventsTotal uint64
}

// RebuildOptions select how a rebuild runs.
type RebuildOptions struct {
	// NoSnapshot replays the whole log instead of starting from a snapshot.
	NoSnapshot bool
	// Lazy applies data/**/raw files as metadata only (see SyncOptions.Lazy).
	Lazy bool
	// Progress, when set, is called as files are restored and events replayed.
	Progress func(Progress)
}

// RebuildResult says what a rebuild did.
type RebuildResult struct {
	Snapshot    ledger.Seq `json:"snapshot"` // seq of the snapshot restored; 0: none (the log alone)
	SnapshotKey string     `json:"snapshotKey,omitempty"`
	Skipped     []string   `json:"skipped,omitempty"` // snapshots that did not read back
	Restored    int        `json:"restored"`          // files written from the snapshot
	Kept        int        `json:"kept"`              // files that already held the snapshot's content
	Removed     int        `json:"removed"`           // files the snapshot does not hold, removed
	Lazy        int        `json:"lazy"`              // files restored as metadata only
	Bytes       int64      `json:"bytes"`             // bytes written by the restore
	Replay      SyncResult `json:"replay"`            // the events after the snapshot
	HWM         ledger.Seq `json:"hwm"`
	Head        ledger.Seq `json:"head"`
}

// snapshots returns the object store holding snapshots; nil if there is none.
func (h *Host) snapshots() ledger.ObjectStore {
	if h.cfg.Snapshots != nil {
		return h.cfg.Snapshots
	}
	objs, _ := ledger.ObjectsOf(h.cfg.Blobs)
	return objs
}

// newestSnapshot returns the seq of the newest snapshot listed (0 if none, or
// when the listing fails: status is not the place to fail for it).
func (h *Host) newestSnapshot(ctx context.Context, uuid string) ledger.Seq {
	objs := h.snapshots()
	if objs == nil || uuid == "" {
		return 0
	}
	infos, err := snapshot.List(ctx, objs, uuid)
	if err != nil {
		h.log.Warn("listing snapshots", "err", err)
		return 0
	}
	if len(infos) == 0 {
		return 0
	}
	return infos[0].Seq
}

// Rebuild starts the cache over: it restores the newest usable snapshot (one
// after which the log still holds every event; a snapshot that does not read
// back is skipped with a warning and the next older one used), then replays
// the log from the snapshot's seq N+1 like a full sync. The result is the cache
// a host that synced live holds: the same files, modes, index, marks and HWM.
//
// The restore makes the files match the snapshot — writing those that differ,
// keeping those that already match, removing indexed files the snapshot does not
// hold — and then replaces the whole persisted state (index, marks, HWM) in one
// transaction: a rebuild starts a new state (I3), so marks and HWM may move
// back. Local changes are never lost: a file whose content is neither what the
// index last recorded nor what the snapshot holds stops the rebuild before
// anything is written (*LocalChangesError); files the ledger does not know are
// left alone, and a missing file is simply restored.
//
// A crash during the restore leaves the old state and whatever files were
// written (each atomically, verified); running Rebuild again finishes it. A crash
// during the replay leaves a cache at a commit boundary that the next sync
// continues.
func (h *Host) Rebuild(ctx context.Context, opt RebuildOptions) (RebuildResult, error) {
	release, aerr := h.acquire()
	if aerr != nil {
		return RebuildResult{}, aerr
	}
	defer release()
	var res RebuildResult
	info, _, _, err := h.checkLineage(ctx)
	if err != nil {
		return res, fmt.Errorf("rebuild: %w (a rebuild never changes a cache's ledger: use an empty directory)", err)
	}
	objs := h.snapshots()
	var b ledger.Bounds
	floor := ledger.Seq(1)
	if objs != nil {
		b, floor, err = snapshot.Floor(ctx, h.cfg.Log, objs, info.UUID)
	} else {
		b, err = h.cfg.Log.Bounds(ctx)
		floor = max(b.First, 1)
	}
	if err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	base := &snapshot.Snapshot{Ledger: info.UUID, Name: info.Name}
	if !opt.NoSnapshot && objs != nil {
		s, si, err := snapshot.Select(ctx, objs, info.UUID,
			func(i snapshot.Info) bool { return i.Seq+1 >= floor && i.Seq <= b.Last },
			func(i snapshot.Info, err error) {
				h.log.Warn("skipping snapshot that does not read back; trying an older one", "key", i.Key, "err", err)
				res.Skipped = append(res.Skipped, i.Key)
			})
		switch {
		case err == nil:
			base, res.Snapshot, res.SnapshotKey = s, s.Seq, si.Key
		case !errors.Is(err, ledger.ErrNotFound):
			return res, fmt.Errorf("rebuild: %w", err)
		}
	}
	if base.Seq == 0 && floor > 1 {
		return res, fmt.Errorf("rebuild: no usable snapshot: %w", &ledger.TruncatedError{From: 1, First: floor})
	}
	h.log.Info("rebuilding cache", "cache", h.dir.Root(), "snapshot", res.SnapshotKey, "seq", base.Seq, "head", b.Last)
	if err := h.restore(ctx, info, base, opt, &res); err != nil {
		return res, fmt.Errorf("rebuild: restore snapshot at seq %d: %w", base.Seq, err)
	}
	s, err := h.load(ctx, opt.Lazy)
	if err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	head, err := h.cfg.Log.LastSeq(ctx)
	if err != nil {
		return res, fmt.Errorf("rebuild: read last seq: %w", err)
	}
	res.Head, res.Replay.Head = head, head
	if head > base.Seq {
		total := uint64(head - base.Seq)
		var progress func(SyncResult)
		if opt.Progress != nil {
			progress = func(r SyncResult) {
				opt.Progress(Progress{Phase: "replay", Events: uint64(r.Events), EventsTotal: total, Files: r.Written, Bytes: r.Bytes})
			}
		}
		err = h.readFull(ctx, s, base.Seq+1, head, &res.Replay, progress)
	}
	res.HWM = s.core.HWM()
	res.Replay.HWM = res.HWM
	if err != nil {
		return res, fmt.Errorf("rebuild: replay from seq %d: %w", base.Seq+1, err)
	}
	h.log.Info("cache rebuilt", "snapshot", base.Seq, "events", res.Replay.Events, "hwm", res.HWM)
	return res, nil
}

// rebuildAfterTruncation is a full sync's fallback when the log no longer holds
// the events the cache needs: a rebuild from a snapshot, reported as the sync.
func (h *Host) rebuildAfterTruncation(ctx context.Context, opt SyncOptions, cause error) (SyncResult, error) {
	if h.snapshots() == nil {
		return SyncResult{}, cause
	}
	h.log.Warn("the log no longer holds the events this cache needs: rebuilding it from a snapshot", "err", cause)
	ro := RebuildOptions{Lazy: opt.Lazy}
	if opt.Progress != nil {
		ro.Progress = func(p Progress) {
			opt.Progress(SyncResult{Events: int(p.Events), Written: p.Files, Bytes: p.Bytes})
		}
	}
	rr, err := h.Rebuild(ctx, ro)
	res := rr.Replay
	res.Rebuilt = true
	res.Written += rr.Restored
	res.Deleted += rr.Removed
	res.Lazy += rr.Lazy
	res.Bytes += rr.Bytes
	if err != nil {
		return res, fmt.Errorf("%w (after: %v)", err, cause)
	}
	return res, nil
}

// restoreJob is what the restore does to one path.
type restoreJob struct {
	path string
	want *projector.File // nil: the path must not exist
	row  statedb.Entry   // the index row to persist (want != nil)
	op   projector.Op    // OpWrite, OpLazy, OpDelete, or OpIndex (already right)
}

// restore makes the cache and its persisted state equal to snap.
func (h *Host) restore(ctx context.Context, info ledger.Info, snap *snapshot.Snapshot, opt RebuildOptions, res *RebuildResult) error {
	old := map[string]statedb.Entry{}
	if err := h.db.ForEach(func(p string, e statedb.Entry) error { old[p] = e; return nil }); err != nil {
		return err
	}
	journal, err := h.db.Journal()
	if err != nil {
		return err
	}
	want := make(map[string]snapshot.Entry, len(snap.Entries))
	for _, e := range snap.Entries {
		want[e.Path] = e
	}
	// Every path the old index, the snapshot or an interrupted apply (the
	// journal) knows: a journalled file neither of the others holds is removed.
	paths := slices.Collect(maps.Keys(old))
	for _, e := range snap.Entries {
		if _, ok := old[e.Path]; !ok {
			paths = append(paths, e.Path)
		}
	}
	for p := range journal {
		if _, ok := old[p]; !ok {
			if _, ok := want[p]; !ok {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	var (
		jobs  []restoreJob
		local []string
	)
	st := h.dir.NewStater()
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		row, hasRow := old[p]
		ds, err := h.inspect(st, p, row, hasRow)
		if err != nil {
			return fmt.Errorf("inspect %s: %w", p, err)
		}
		var oldF *projector.File
		if hasRow {
			oldF = &projector.File{SHA256: row.Digest, Size: row.Size, Mode: row.Mode}
		}
		j := restoreJob{path: p, op: projector.OpDelete}
		if e, ok := want[p]; ok {
			j.want = &projector.File{SHA256: e.SHA256, Size: e.Size, Mode: e.Mode}
			j.row = statedb.Entry{Digest: e.SHA256, Size: e.Size, Mode: e.Mode, Seq: e.Seq}
			j.op = projector.OpWrite
		}
		left := journal[p].Matches(ds.exists, ds.digest) && (ds.hashed || !ds.exists)
		if ds.exists && !ds.matches(oldF) && !ds.matches(j.want) && !left {
			local = append(local, p)
			continue
		}
		switch {
		case j.want != nil && ds.matches(j.want):
			j.op, j.row.MTime = projector.OpIndex, ds.info.ModTime // already there (kept even when lazy)
		case j.want != nil && opt.Lazy && ledger.IsLazySkippable(p):
			j.op, j.row.Lazy = projector.OpLazy, true
		case j.want == nil && !ds.exists:
			continue // gone already
		}
		jobs = append(jobs, j)
	}
	if len(local) > 0 {
		return &LocalChangesError{Paths: local}
	}
	// Journal the restore's file operations like an apply's, so a crash in the
	// middle leaves nothing the next command takes for a local change.
	jr := map[string]statedb.JournalEntry{}
	for _, j := range jobs {
		switch {
		case j.op == projector.OpWrite:
			jr[j.path] = statedb.JournalEntry{Digests: []ledger.Digest{j.want.SHA256}}
		case j.op != projector.OpIndex:
			jr[j.path] = statedb.JournalEntry{Removed: true}
		}
	}
	if len(jr) > 0 {
		merged, err := h.db.AddJournal(jr)
		if err != nil {
			return fmt.Errorf("journal restore: %w", err)
		}
		maps.Copy(journal, merged)
	}
	if err := h.runRestore(ctx, jobs, opt.Progress, res); err != nil {
		return err
	}
	return h.db.Update(func(tx *statedb.Tx) error {
		if err := tx.Reset(); err != nil {
			return err
		}
		// Every journalled path now holds the snapshot's state.
		for p := range journal {
			if err := tx.ClearJournal(p); err != nil {
				return err
			}
		}
		if err := tx.SetLedger(info.UUID, info.Name); err != nil {
			return err
		}
		for _, j := range jobs {
			if j.want == nil {
				continue
			}
			if err := tx.Put(j.path, j.row); err != nil {
				return err
			}
		}
		for p, m := range snap.Marks {
			if err := tx.PutMark(p, m); err != nil {
				return err
			}
		}
		return tx.SetHWM(snap.Seq)
	})
}

// runRestore performs the jobs' file work: fetches in parallel (bounded),
// removals in order. Rows of written files get the written file's mtime.
func (h *Host) runRestore(ctx context.Context, jobs []restoreJob, progress func(Progress), res *RebuildResult) error {
	p := Progress{Phase: "restore"}
	for _, j := range jobs {
		if j.op == projector.OpWrite {
			p.FilesTotal++
			p.BytesTotal += j.want.Size
		}
	}
	if progress != nil {
		progress(p)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, h.cfg.Parallel)
	)
	// Removals first, in order: cachefs.Remove also removes the directories it
	// empties, which must not race with a write creating a file in one of them.
	for _, j := range jobs {
		switch j.op {
		case projector.OpIndex:
			res.Kept++
		case projector.OpDelete, projector.OpLazy:
			if err := h.dir.Remove(j.path); err != nil {
				return err
			}
			if j.op == projector.OpLazy {
				res.Lazy++
			} else {
				res.Removed++
			}
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if j.op == projector.OpWrite && ctx.Err() == nil {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				fi, err := fetchInto(ctx, h.cfg.Blobs, h.dir, j.path, j.want)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				j.row.MTime = fi.ModTime
				res.Restored++
				res.Bytes += fi.Size
				p.Files++
				p.Bytes += fi.Size
				if progress != nil {
					progress(p)
				}
			}()
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// fetchInto downloads f's blob and writes it at path in dir, verified.
func fetchInto(ctx context.Context, blobs ledger.BlobStore, dir *cachefs.Dir, path string, f *projector.File) (cachefs.FileInfo, error) {
	rc, err := blobs.Get(ctx, f.SHA256)
	if err != nil {
		return cachefs.FileInfo{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	defer rc.Close()
	fi, err := dir.Write(path, rc, f.SHA256, f.Size, f.Mode)
	if err != nil {
		return cachefs.FileInfo{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	return fi, nil
}

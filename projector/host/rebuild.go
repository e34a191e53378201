package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/snapshot"
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
	// Damaged is where the rebuild set aside the damaged state database it
	// started over from (statedb.ErrCorrupt); empty when it was sound.
	Damaged string `json:"damaged,omitempty"`
	// KeptAside lists the files of the cache that differed from the ledger
	// when a rebuild started the state over after damage, kept under
	// KeptIn (a directory of the state directory) by their paths.
	KeptAside []string `json:"keptAside,omitempty"`
	KeptIn    string   `json:"keptIn,omitempty"`
	// Healed: the ledger had lost commits this cache applied, and the
	// rebuild kept them (heal.go): what went back to republish, what stayed
	// aside. The counts above are the heal's rebuild's.
	Healed *Healed `json:"healed,omitempty"`
}

// snapshots returns the object store holding snapshots; nil if there is none.
func (h *Host) snapshots() *ledger.Bucket {
	if h.cfg.Snapshots != nil {
		return h.cfg.Snapshots
	}
	if h.cfg.Blobs == nil { // OpenLocal
		return nil
	}
	return h.blobsPort()
}

// newestSnapshot returns the seq of the newest snapshot listed (0 if none, or
// when the listing fails: status is not the place to fail for it).
func (h *Host) newestSnapshot(ctx context.Context, uuid string) ledger.Seq {
	objs := h.snapshots()
	if objs == nil || uuid == "" {
		return 0
	}
	infos, err := snapshot.ListAttested(ctx, h.cfg.Log, objs, uuid)
	if err != nil {
		h.log.Warn("listing snapshots", "err", err)
		return 0
	}
	for _, i := range infos {
		if i.Attested {
			return i.Seq
		}
	}
	return 0
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
// back. Local changes are never lost: a locally edited file whose indexed
// version is the snapshot's (an edit that conflicts with nothing) is left as
// it is, an uncommitted change on top of the restored index for a commit to
// publish; one whose indexed version the snapshot replaced stops the rebuild
// before anything is written (*LocalChangesError); files the ledger does not
// know are left alone, and a missing file is simply restored.
//
// A crash during the restore leaves the old state and whatever files were
// written (each atomically, verified); running Rebuild again finishes it. A crash
// during the replay leaves a cache at a commit boundary that the next sync
// continues.
//
// A damaged state database (statedb.ErrCorrupt) is set aside and the state
// started over: the files of the cache that differ from the ledger are kept
// under .syncledger/conflicts/<time>/ (see damage.go).
func (h *Host) Rebuild(ctx context.Context, opt RebuildOptions) (RebuildResult, error) {
	var res RebuildResult
	damaged, err := h.checkState()
	if err != nil {
		return res, err
	}
	res.Damaged = damaged
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return res, aerr
	}
	defer release()
	keep, err := h.db.Recovering()
	if err != nil {
		return res, err
	}
	if keep != "" && h.keepDir == "" {
		h.keepDir = h.dir.StatePath(filepath.FromSlash(keep))
		res.KeptIn = filepath.ToSlash(filepath.Join(ledger.StateDir, keep))
		defer func() { h.keepDir = "" }()
	}
	info, _, hwm, err := h.checkLineage(ctx)
	if err != nil {
		return res, fmt.Errorf("rebuild: %w (a rebuild never changes a cache's ledger: use an empty directory)", err)
	}
	if h.keepDir == "" {
		// A ledger that lost commits this cache applied: rebuilding would
		// remove them (issue 39). The heal keeps them, republishable.
		fork, err := h.forked(ctx, hwm)
		if err != nil {
			return res, fmt.Errorf("rebuild: %w", err)
		}
		if fork != nil || h.healing() {
			hd, err := h.heal(ctx, healOptions{lazy: opt.Lazy, progress: opt.Progress}, fork)
			if hd != nil {
				res, res.Healed = hd.Rebuild, hd
			}
			return res, err
		}
	}
	return res, h.rebuild(ctx, info, opt, &res)
}

// rebuild is Rebuild once the cache is held and its lineage checked: the
// snapshot restored, then the log replayed (also a heal's, heal.go).
func (h *Host) rebuild(ctx context.Context, info ledger.Info, opt RebuildOptions, res *RebuildResult) error {
	objs := h.snapshots()
	b, floor, err := snapshot.Floor(ctx, h.cfg.Log)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	base := &snapshot.Snapshot{Ledger: info.UUID, Name: info.Name}
	var unattested []string
	if !opt.NoSnapshot && objs != nil {
		s, si, err := snapshot.Select(ctx, h.cfg.Log, objs, info.UUID,
			func(i snapshot.Info) bool { return i.Seq+1 >= floor && i.Seq <= b.Last },
			func(i snapshot.Info, err error) {
				h.log.Warn("skipping a snapshot that is not attested or does not read back; trying an older one", "key", i.Key, "err", err)
				res.Skipped = append(res.Skipped, i.Key)
				if !i.Attested {
					unattested = append(unattested, i.Key)
				}
			})
		switch {
		case err == nil:
			base, res.Snapshot, res.SnapshotKey = s, s.Seq, si.Key
		case !errors.Is(err, ledger.ErrNotFound):
			return fmt.Errorf("rebuild: %w", err)
		}
	}
	if base.Seq == 0 && floor > 1 {
		// Snapshots a release before attestations took are not attested
		// until an admin adopts them; on a ledger that attests, an
		// unattested one was planted, or its attestation failed.
		a, err := h.cfg.Log.Attested(ctx)
		attests := err != nil || len(a.Snapshots) > 0 || a.Retained > 0
		wrong, _ := snapshot.WrongBound(ctx, h.cfg.Log)
		return fmt.Errorf("rebuild: %w", &NoSnapshotError{Skipped: res.Skipped, Unattested: unattested, Attests: attests,
			WrongBound: wrong, Err: &ledger.TruncatedError{From: 1, First: floor}})
	}
	h.log.Info("rebuilding cache", "cache", h.dir.Root(), "snapshot", res.SnapshotKey, "seq", base.Seq, "head", b.Last)
	s, err := h.load(ctx, opt.Lazy)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	if err := h.restore(ctx, s, base, opt, res); err != nil {
		return fmt.Errorf("rebuild: restore snapshot at seq %d: %w", base.Seq, err)
	}
	head, err := h.cfg.Log.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("rebuild: read last seq: %w", err)
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
		return fmt.Errorf("rebuild: replay from seq %d: %w", base.Seq+1, err)
	}
	if h.keepDir != "" {
		if res.KeptAside, err = h.finishRecovery(ctx, s); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
	}
	h.log.Info("cache rebuilt", "snapshot", base.Seq, "events", res.Replay.Events, "hwm", res.HWM)
	return nil
}

// rebuildAfterTruncation is a full sync's fallback when the log no longer holds
// the events the cache needs: a rebuild from a snapshot, reported as the sync.
func (h *Host) rebuildAfterTruncation(ctx context.Context, opt SyncOptions, cause error) (SyncResult, error) {
	if h.snapshots() == nil {
		return SyncResult{}, cause
	}
	h.log.Warn("the log no longer holds the events this cache needs: rebuilding it from a snapshot", "err", cause)
	return h.rebuildForSync(ctx, opt, cause)
}

// finishRebuild is what a sync does first when a rebuild's restore was
// interrupted (statedb Restoring): the cache may hold the snapshot's files
// under the old state, and only the rebuild puts the two back together.
func (h *Host) finishRebuild(ctx context.Context, opt SyncOptions, seq ledger.Seq) (SyncResult, error) {
	cause := fmt.Errorf("a rebuild's restore of the snapshot at seq %d was interrupted", seq)
	h.log.Warn("finishing an interrupted rebuild before syncing", "snapshot", seq)
	return h.rebuildForSync(ctx, opt, cause)
}

// rebuildForSync runs a rebuild and reports it as a sync.
func (h *Host) rebuildForSync(ctx context.Context, opt SyncOptions, cause error) (SyncResult, error) {
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

// restore makes the cache and its persisted state equal to snap: a Ready that
// resets the state (projector.Core.Restore), applied like any other. The files
// an interrupted apply may have left (the journal) that neither the index nor
// the snapshot holds are removed.
func (h *Host) restore(ctx context.Context, s *session, snap *snapshot.Snapshot, opt RebuildOptions, res *RebuildResult) error {
	to := projector.State{Ledger: snap.Ledger, HWM: snap.Seq, Marks: snap.Marks, Files: make(map[string]projector.File, len(snap.Entries))}
	seqs := make(map[string]ledger.Seq, len(snap.Entries))
	for _, e := range snap.Entries {
		to.Files[e.Path] = projector.File{SHA256: e.SHA256, Size: e.Size, Mode: e.Mode}
		seqs[e.Path] = e.Seq
	}
	var stray []string
	for p := range s.journal {
		if _, ok := to.Files[p]; !ok {
			_, indexed, err := h.rows.Get(p)
			if err != nil {
				return err
			}
			if !indexed {
				stray = append(stray, p)
			}
		}
	}
	slices.Sort(stray)
	if err := s.core.Restore(to, seqs, stray); err != nil {
		return err
	}

	rd, err := s.core.Ready()
	if err != nil {
		return err
	}
	p := Progress{Phase: "restore"}
	for _, ch := range rd.Changes {
		if ch.Op == projector.OpWrite && (ch.Old == nil || ch.Old.Lazy || !ch.Old.SameContent(*ch.New)) {
			p.FilesTotal++
			p.BytesTotal += ch.New.Size
		}
	}
	var progress func(applied)
	if opt.Progress != nil {
		opt.Progress(p)
		progress = func(a applied) {
			p.Files, p.Bytes = a.Written, a.Bytes
			opt.Progress(p)
		}
	}
	a, err := h.apply(ctx, s, rd, applyOptions{progress: progress})
	res.Restored, res.Kept, res.Removed, res.Lazy, res.Bytes = a.Written, a.Kept, a.Removed, a.Lazy, a.Bytes
	return err
}

package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/statedb"
)

// PartitionStatus is a partition's mark as status reports it.
type PartitionStatus struct {
	ModelSeq uint64     `json:"modelSeq"`
	Seq      ledger.Seq `json:"seq"`
}

// Status is a host's view of itself against the log.
type Status struct {
	Ledger     string                     `json:"ledger"` // name
	UUID       string                     `json:"uuid"`
	Host       string                     `json:"host"`
	Cache      string                     `json:"cache"`
	Head       ledger.Seq                 `json:"head"`     // the log's last seq
	First      ledger.Seq                 `json:"first"`    // the log's first seq
	Snapshot   ledger.Seq                 `json:"snapshot"` // the newest snapshot's seq (0: none)
	HWM        ledger.Seq                 `json:"hwm"`
	Behind     uint64                     `json:"behind"` // head − hwm
	Partitions map[string]PartitionStatus `json:"partitions"`
	Dirty      []string                   `json:"dirty"`   // paths changed locally, not committed
	Ignored    []string                   `json:"ignored"` // paths the ignore rules leave out (directories end in /)
	Lazy       uint64                     `json:"lazy"`    // files applied as metadata only
	Files      int                        `json:"files"`   // indexed files
	// Shadowed: indexed files the cache does not hold because a directory of
	// the same name holds other indexed paths (two hosts raced; the directory
	// wins). Each comes back when the last path under it goes; 'replay'
	// writes them under .syncledger-shadowed/.
	Shadowed []string `json:"shadowed"`
	// Conflicts: dirty paths the ledger changed too since this host last
	// synced them (see Conflicts); resolve each with 'syncledger resolve'.
	Conflicts []string `json:"conflicts"`
	// Quarantined: the ledger's seqs every reader skips (ledger.Quarantine;
	// 'syncledger quarantine --list').
	Quarantined []ledger.Seq `json:"quarantined"`
	// Forked: the log no longer holds the commits this cache applied at its
	// HWM (or ends below it): the server lost them — restored from an older
	// backup, or replaced — and maybe was written to since (identity.go).
	// Behind then says nothing; a sync republishes what the ledger lost.
	Forked *ForkError `json:"forked,omitempty"`
	// Offline: the ledger was not read (OpenLocal): Head, First, Snapshot,
	// Behind, Conflicts and Quarantined are unknown, and Ledger and UUID are
	// the cache's own record.
	Offline bool `json:"offline,omitempty"`
	// Source is where the log's head was read and how stale it may be: the
	// origin, or a mirror as of its last contact with the origin (its lag,
	// and whether the origin was out of reach). Through a mirror, Head is
	// the origin's when the origin answered (one request more).
	Source *ledger.Head `json:"source,omitempty"`
}

// Status reports the HWM against the log's head, the marks, and the uncommitted
// local changes.
func (h *Host) Status(ctx context.Context) (_ Status, err error) {
	if !h.cfg.local {
		var done func(error) error
		ctx, done = h.watching(ctx, "status")
		defer func() { err = done(err) }()
	}
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return Status{}, aerr
	}
	defer release()
	if h.cfg.local {
		return h.localStatus()
	}
	s, err := h.load(ctx, false)
	if err != nil {
		return Status{}, err
	}
	b, err := h.logPort().Bounds(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("read log bounds: %w", err)
	}
	hd, err := h.cfg.Log.Head(ctx, ledger.HeadRequest{})
	if err != nil {
		return Status{}, fmt.Errorf("read the log's head: %w", err)
	}
	b.Last = max(b.Last, hd.Seq)
	if !hd.FromOrigin() {
		// Read through a mirror: the origin says how far behind it is
		// (one request to it), or that it cannot be reached.
		oh, err := h.cfg.Log.Head(ctx, ledger.HeadRequest{Origin: true})
		switch {
		case errors.Is(err, ledger.ErrUnreachable):
			hd.OriginUnreachable = true
		case err != nil:
			return Status{}, fmt.Errorf("read the origin's head: %w", err)
		default:
			b.Last = max(b.Last, oh.Seq)
		}
	}
	st, err := h.rows.Load()
	if err != nil {
		return Status{}, err
	}
	out := Status{
		Ledger: s.info.Name, UUID: s.info.UUID, Host: h.cfg.Host, Cache: h.dir.Root(),
		Head: b.Last, First: b.First, HWM: st.HWM, Partitions: map[string]PartitionStatus{},
		Dirty: []string{}, Source: &hd,
	}
	out.Snapshot = h.newestSnapshot(ctx, s.info.UUID) // rebuild.go
	out.Quarantined = []ledger.Seq{}
	qs, err := h.logPort().Quarantines(ctx)
	if err != nil {
		return out, err
	}
	out.Quarantined = slices.Sorted(maps.Keys(qs))
	if b.Last > st.HWM {
		out.Behind = uint64(b.Last - st.HWM)
	}
	// A mirror behind this cache, the origin out of reach: nothing says the
	// log lost what this cache holds (no fork is claimed).
	var cerr error
	if !(hd.OriginUnreachable && b.Last < st.HWM) {
		cerr = h.checkHWM(ctx, b.Last, st.HWM)
	}
	if err := cerr; err != nil {
		if !errors.As(err, &out.Forked) {
			return out, err
		}
		out.Behind = 0
	}
	sc, err := h.statusLocal(&out, s, st)
	if err != nil {
		return out, err
	}
	if out.Conflicts, err = h.conflicts(ctx, s, sc.changes); err != nil {
		// What the host knows of itself is still worth showing.
		h.log.Warn("cannot tell which uncommitted changes conflict with the ledger", "err", err)
		out.Conflicts = []string{}
	}
	return out, nil
}

// statusLocal fills in what the cache alone knows: the marks (of st, the
// state's record), the number of files, the lazy count, the shadowed files,
// and the scan's dirty and ignored paths. It returns the scan.
func (h *Host) statusLocal(out *Status, s *session, st statedb.State) (scanned, error) {
	for p, m := range st.Marks {
		out.Partitions[p] = PartitionStatus{ModelSeq: m.ModelSeq, Seq: m.Seq}
	}
	var err error
	if out.Files, err = h.db.Len(); err != nil {
		return scanned{}, err
	}
	if out.Lazy, err = h.db.LazyCount(); err != nil {
		return scanned{}, err
	}
	shadowed, err := s.core.ShadowedFiles()
	if err != nil {
		return scanned{}, err
	}
	out.Shadowed = append([]string{}, shadowed...)
	sc, err := h.scan(s, partitionFilter(nil), nil, nil, scanBound{})
	if err != nil {
		return sc, err
	}
	for _, e := range sc.changes {
		out.Dirty = append(out.Dirty, e.Path)
	}
	out.Ignored = append([]string{}, sc.ignored...)
	return sc, nil
}

// localStatus is Status from the cache alone: its record of the ledger, HWM and
// marks, and the scan against its index.
func (h *Host) localStatus() (Status, error) {
	s, err := h.loadLocal(false)
	if err != nil {
		return Status{}, err
	}
	st, err := h.rows.Load()
	if err != nil {
		return Status{}, err
	}
	out := Status{
		Ledger: st.Name, UUID: st.Ledger, Host: h.cfg.Host, Cache: h.dir.Root(), HWM: st.HWM,
		Partitions: map[string]PartitionStatus{}, Dirty: []string{},
		Conflicts: []string{}, Offline: true,
	}
	_, err = h.statusLocal(&out, s, st)
	return out, err
}

// VerifyResult lists indexed files whose cache copy is missing or altered.
type VerifyResult struct {
	Checked int      `json:"checked"`
	Missing []string `json:"missing"`
	Altered []string `json:"altered"`
	Lazy    int      `json:"lazy"` // not checked: metadata only
	// Restored are the altered files Repair wrote again from the blob store
	// (no longer in Altered).
	Restored []string `json:"restored"`
}

// OK reports whether every checked file matched.
func (v VerifyResult) OK() bool { return len(v.Missing) == 0 && len(v.Altered) == 0 }

// Verify hashes every indexed (non-lazy, not ignored) file and compares it with
// the index.
func (h *Host) Verify(ctx context.Context) (VerifyResult, error) {
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return VerifyResult{}, aerr
	}
	defer release()
	return h.verify(ctx)
}

// verify is Verify with the cache held.
func (h *Host) verify(ctx context.Context) (VerifyResult, error) {
	out := VerifyResult{Missing: []string{}, Altered: []string{}, Restored: []string{}}
	ign, err := h.dir.Ignore()
	if err != nil {
		return out, err
	}
	shadowed, err := h.shadowedRows()
	if err != nil {
		return out, err
	}
	err = h.rows.ForEach(func(path string, e statedb.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if shadowed[path] {
			return nil // a directory of its name holds other paths: not in the cache
		}
		if ign.Ignored(path) {
			return nil // this host's own file: never synced, nothing to compare
		}
		if e.Lazy {
			out.Lazy++
			return nil
		}
		out.Checked++
		d, n, err := h.dir.Hash(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out.Missing = append(out.Missing, path)
		case err != nil:
			out.Altered = append(out.Altered, path)
		case d != e.Digest || n != e.Size:
			out.Altered = append(out.Altered, path)
		}
		return nil
	})
	return out, err
}

// Fetch hydrates lazy files (content on demand). Paths not in the index fail with
// ledger.ErrNotFound; paths already present are left alone.
func (h *Host) Fetch(ctx context.Context, paths []string) (_ SyncResult, err error) {
	ctx, done := h.watching(ctx, "fetch")
	defer func() { err = done(err) }()
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return SyncResult{}, aerr
	}
	defer release()
	s, err := h.load(ctx, true)
	if err != nil {
		return SyncResult{}, err
	}
	sort.Strings(paths)
	if err := s.core.Hydrate(paths...); err != nil {
		return SyncResult{}, err
	}
	res := SyncResult{HWM: s.core.HWM()}
	r := &run{h: h, s: s, res: &res}
	err = r.flush(ctx)
	var gone *ContentGoneError
	if errors.As(err, &gone) {
		gone.Paths, gone.HWM = paths, res.HWM // the way out fetches what was asked
		if gone.Head, err = h.logPort().LastSeq(ctx); err != nil {
			return res, fmt.Errorf("%w (and reading the log's last seq: %w)", gone, err)
		}
		return res, gone
	}
	return res, err
}

// ContentGoneError: a fetch (Host.Fetch) found the content of lazily synced
// files missing from the blob store. A host behind the log's head may index
// versions that later commits replaced, and gc deletes those once retention
// has dropped the events that wrote them (issue 26 point 10): a sync brings the
// current versions, whose content the store keeps, and the fetch then works.
// At the head, the current version's content is lost: the commit that wrote it
// is a message an admin may quarantine (the ledger's log names it).
type ContentGoneError struct {
	Paths     []string   // the paths asked for (Err names the one found missing)
	HWM, Head ledger.Seq // this host's HWM and the log's last seq when it failed
	Err       error      // the blob store's answer
}

func (e *ContentGoneError) Error() string {
	if e.HWM < e.Head {
		return fmt.Sprintf("fetch %q: its content is no longer in the blob store (%v): this cache indexes the version of seq %d or before, the ledger is at seq %d, and gc deletes the versions later commits replaced: sync, then fetch again",
			e.Paths, e.Err, e.HWM, e.Head)
	}
	return fmt.Sprintf("fetch %q: the ledger's current version is not in the blob store (%v): its content was lost; an admin may quarantine the commit that wrote it, or a host holding the file may commit it again",
		e.Paths, e.Err)
}

// Behind reports whether the host was behind the head: a sync then brings
// the current versions, whose content the store keeps, and the same fetch
// works. At the head the content is lost.
func (e *ContentGoneError) Behind() bool { return e.HWM < e.Head }

func (e *ContentGoneError) Unwrap() error { return e.Err }

// Watch keeps the cache current: it syncs, then follows the log from HWM+1,
// applying each commit as soon as its last part arrives, until ctx is done. It
// calls applied after each commit it applies, and once for the first sync if
// that read anything. It returns nil when ctx is cancelled, with every applied
// commit persisted.
//
// Watch releases the cache (see Host.Release) and then holds it only while it
// applies a commit, so other processes (commit, exec, status) can use it
// meanwhile; when one changed the state (statedb.DB.Gen moved), Watch reloads
// it before applying the next commit.
//
// Before it applies each commit, Watch checks that the log still holds the
// commit at this cache's HWM (identity.go): a server restored from an older
// backup while Watch ran is synced again, as a sync heals it, and followed
// from there.
func (h *Host) Watch(ctx context.Context, opt SyncOptions, applied func(SyncResult)) error {
	for {
		err := h.watch(ctx, opt, applied)
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			// Cancelled between the first sync and the follow (or during
			// either): what was applied is persisted, transaction by
			// transaction, as documented.
			return nil
		}
		if !errors.Is(err, ledger.ErrRewound) || ctx.Err() != nil {
			return err
		}
		h.log.Warn("watch: the ledger lost commits this cache applied; syncing again", "err", err)
	}
}

// watch is one pass of Watch: a sync, then the log followed until ctx ends or
// an error, a rewound log's included.
func (h *Host) watch(ctx context.Context, opt SyncOptions, applied func(SyncResult)) error {
	first, err := h.Sync(ctx, opt)
	if err != nil {
		return err
	}
	if first.Events > 0 && applied != nil {
		applied(first)
	}
	w := &watcher{h: h, lazy: opt.Lazy}
	if err := w.hold(ctx); err != nil {
		return err
	}
	from := w.r.s.core.HWM() + 1
	if err := w.let(); err != nil {
		return err
	}
	h.Release() // from here on, the cache is held only while a commit is applied
	res := SyncResult{}
	err = h.cfg.Log.Follow(ctx, from, func(rec ledger.Record) error {
		if skip, err := w.skipApplied(ctx, rec.Seq); err != nil || skip {
			if skip && rec.LastOfCommit() && applied != nil {
				applied(SyncResult{Head: rec.Seq, HWM: h.HWM()}) // applied by another process
			}
			return err
		}
		if err := w.hold(ctx); err != nil {
			return err
		}
		if res.Events == 0 {
			// A commit's first record: the history followed must still be
			// the one this cache applied.
			if err := h.checkLastCommit(ctx); err != nil {
				return err
			}
		}
		w.r.res = &res
		if err := w.r.offer(ctx, projector.Full, rec); err != nil {
			return err
		}
		if !rec.LastOfCommit() {
			return nil
		}
		res.Head = rec.Seq
		if err := w.r.flush(ctx); err != nil {
			return err
		}
		if err := w.let(); err != nil {
			return err
		}
		if applied != nil {
			applied(res)
		}
		res = SyncResult{}
		return nil
	})
	if ctx.Err() != nil {
		// Persist what was fully read; a partly read commit is read again next time.
		bg := context.WithoutCancel(ctx)
		ferr := w.hold(bg)
		if ferr == nil {
			ferr = w.r.flush(bg)
		}
		if lerr := w.let(); ferr == nil {
			ferr = lerr
		}
		return ferr
	}
	w.let()
	return needsRebuild(err)
}

// watcher is Watch's hold on the cache between commits: the session it keeps
// in memory, and the state generation that session reflects.
type watcher struct {
	h       *Host
	lazy    bool
	r       *run
	gen     uint64 // the state's generation when the session was last in step with it
	release func() // non-nil while the cache is held
}

// hold takes the cache unless held, waiting as long as another process keeps
// it (a long commit), and reloads the session if the state changed since.
func (w *watcher) hold(ctx context.Context) error {
	if w.release != nil {
		return nil
	}
	if err := w.lock(ctx); err != nil {
		return err
	}
	return w.reload(ctx)
}

// lock takes the cache, waiting as long as another process keeps it.
func (w *watcher) lock(ctx context.Context) error {
	for {
		release, err := w.h.acquire(ctx)
		if err == nil {
			w.release = release
			break
		}
		if !errors.Is(err, statedb.ErrLocked) || ctx.Err() != nil {
			return err
		}
		w.h.log.Info("watch: waiting for another process to release the cache")
	}
	return nil
}

// reload loads the session (the cache held) if the state changed since.
func (w *watcher) reload(ctx context.Context) error {
	gen, err := w.h.db.Gen()
	if err != nil {
		return err
	}
	if w.r != nil && gen == w.gen {
		return nil
	}
	if w.r != nil {
		w.h.log.Info("watch: the state changed in another process; reloading it")
	}
	s, err := w.h.load(ctx, w.lazy)
	if err != nil {
		return err
	}
	if w.r == nil {
		w.r = &run{h: w.h}
	}
	w.r.s = s
	w.gen, err = w.h.db.Gen()
	return err
}

// skipApplied reports whether the record at seq, the start of a commit, is
// already applied to the cache: another process (a commit of this host, whose
// own events the watch then reads) moved the persisted HWM past it. The watch
// skips such a commit without reloading its session or reading the commit's
// events into it: it holds the cache only for the one read of the HWM, so a
// commit beside a running watch costs the watch, and the next command waiting
// for the cache, next to nothing.
func (w *watcher) skipApplied(ctx context.Context, seq ledger.Seq) (bool, error) {
	if w.release != nil {
		return false, nil // in the middle of a commit
	}
	if err := w.lock(ctx); err != nil {
		return false, err
	}
	_, hwm, err := w.h.db.HWM()
	if err == nil && seq > hwm {
		err = w.reload(ctx)
	}
	if err != nil || seq > hwm {
		return false, err
	}
	// Release without let: the session stays behind the state's generation, so
	// the next commit to apply reloads it.
	w.h.hwm.Store(uint64(hwm))
	w.release()
	w.release = nil
	return true, nil
}

// let records the state's generation (the session is in step with it) and
// releases the cache.
func (w *watcher) let() error {
	if w.release == nil {
		return nil
	}
	gen, err := w.h.db.Gen()
	w.gen = gen
	w.release()
	w.release = nil
	return err
}

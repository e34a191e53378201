package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/ignore"
	"github.com/syncledger/syncledger/projector/statedb"
)

// Healing a cache whose ledger lost commits it applied (issue 39): a server
// restored from an older backup, or a hot copy of its data directory put
// back, holds a prefix of the history this cache applied, and maybe other
// commits after it. The cache holds what the ledger lost — its own runs, and
// other hosts' it pulled — and gives it back; it never deletes it:
//
//  1. The fork point. The commits recorded at the marks and the top one
//     (identity.go) are points of the history this cache applied; the log
//     holds the same commit at a seq up to where it was restored, and not
//     after (a restored log is a prefix of the old history, then new
//     commits). A binary search over them, one CommitAt a step, finds Common:
//     the last of them the log still holds. Every index row at or below it is
//     the ledger's still; a row above it may be lost.
//  2. Set aside. Each file of a row above Common, and each uncommitted local
//     change (the scan's), is moved to .syncledger/conflicts/<time>/ under
//     its path; a lazy row's content is fetched there first when the blob
//     store still has it. heal.json, written durably before anything moves,
//     lists them: a crash anywhere resumes from it.
//  3. Rebuild. With nothing of this host's in the way, the state starts over
//     from the ledger (snapshot and log, rebuild.go): the cache is the
//     ledger's as it is now.
//  4. Put back. Each file set aside goes back to its path when the ledger
//     does not hold that path, or holds it as of Common or before (this
//     host's version came after it); a copy equal to the ledger's is dropped
//     (another host republished it already); a file the ledger has written
//     since Common with other content stays in the conflicts directory, and
//     the result says so (Kept). A local deletion of a file the ledger still
//     holds as this host last had it is done again. Files one group holds
//     (SyncOptions.Together: a swamp data version) go back, or stay, together.
//  5. Republish. What went back of lost commits is an uncommitted change; a
//     sync commits it (SyncOptions.NoRepublish leaves that to its caller:
//     swamp renumbers first), under the usual conflict rules. This host's
//     own uncommitted changes go back uncommitted, as they were.
//
// Deletions the lost commits made are not known to the cache (a deleted row
// is gone): the files they deleted come back from the ledger. Nothing is
// lost; what was deleted may need deleting again.

// Healed says what a heal did (SyncResult.Healed, RebuildResult.Healed).
type Healed struct {
	// Fork is what was detected (nil when a heal interrupted earlier was
	// finished).
	Fork *ForkError `json:"fork,omitempty"`
	// Common is the last seq at which the log still holds the commit this
	// cache applied (0: none known).
	Common ledger.Seq `json:"common"`
	// SetAside counts the files moved aside: rows past Common and local
	// changes.
	SetAside int `json:"setAside"`
	// Republish lists the files of lost commits put back for a commit to
	// publish; Published is that commit (nil when the caller publishes).
	Republish []string      `json:"republish"`
	Published *CommitResult `json:"published,omitempty"`
	// Local lists this host's uncommitted changes put back (still
	// uncommitted: a commit publishes them as before), Deleted its
	// uncommitted deletions done again.
	Local   []string `json:"local"`
	Deleted []string `json:"deleted"`
	// Same counts copies equal to what the ledger holds now: dropped.
	Same int `json:"same"`
	// Kept lists the files the ledger has written since Common with other
	// content: left in KeptIn (a directory of the state directory, relative
	// to the cache root), not republished.
	Kept   []string `json:"kept"`
	KeptIn string   `json:"keptIn,omitempty"`
	// Gone lists lazily synced files of lost commits whose content neither
	// this cache nor the blob store holds: not republished by this host.
	Gone []string `json:"gone"`
	// Rebuild is the rebuild of step 3 (in RebuildResult and SyncResult
	// already).
	Rebuild RebuildResult `json:"-"`
}

// healOptions are what a heal takes from the operation that found the fork.
type healOptions struct {
	lazy     bool
	progress func(Progress)
	together func(path string) string
}

// healFile is the heal's journal (.syncledger/heal.json).
const healFile = "heal.json"

// healJournal is what a heal records before it moves anything.
type healJournal struct {
	Stamp   string       `json:"stamp"` // conflicts/<stamp>/
	Common  ledger.Seq   `json:"common"`
	Rebuilt bool         `json:"rebuilt"` // step 3 done
	Fork    *ForkError   `json:"fork,omitempty"`
	Entries []healEntry  `json:"entries"`
	Gone    []string     `json:"gone,omitempty"`
	Old     []healOldRow `json:"old,omitempty"` // the rows of the local deletions
}

// healEntry is one file set aside, or one local deletion (Deleted).
type healEntry struct {
	Path    string        `json:"path"`
	Local   bool          `json:"local,omitempty"` // an uncommitted change (the scan's), not a row
	Deleted bool          `json:"deleted,omitempty"`
	SHA256  ledger.Digest `json:"sha256"`
	Size    int64         `json:"size"`
	Mode    uint32        `json:"mode"`
}

// healOldRow is the index row a local deletion removed the file of.
type healOldRow struct {
	Path   string        `json:"path"`
	SHA256 ledger.Digest `json:"sha256"`
	Seq    ledger.Seq    `json:"seq"`
}

// healing reports whether a heal was interrupted (its journal is there).
func (h *Host) healing() bool {
	_, err := os.Stat(h.dir.StatePath(healFile))
	return err == nil
}

// forked reports the fork a full sync would find (nil if none): the log's
// last seq against hwm, and the HWM's commit.
func (h *Host) forked(ctx context.Context, hwm ledger.Seq) (*ForkError, error) {
	hd, err := h.cfg.Log.Head(ctx, ledger.HeadRequest{})
	if err == nil && hd.Seq < hwm {
		hd, err = h.cfg.Log.Head(ctx, ledger.HeadRequest{Origin: true}) // see Sync
	}
	if err != nil {
		return nil, fmt.Errorf("read last seq: %w", err)
	}
	head := hd.Seq
	err = h.checkHWM(ctx, head, hwm)
	var fe *ForkError
	if errors.As(err, &fe) {
		return fe, nil
	}
	return nil, err
}

// heal runs steps 1 to 4 (see above), or finishes an interrupted heal. The
// cache is held.
func (h *Host) heal(ctx context.Context, opt healOptions, fork *ForkError) (*Healed, error) {
	j, err := h.readHeal()
	if err != nil {
		return nil, err
	}
	if j == nil {
		h.log.Warn("the ledger lost commits this cache applied: keeping this cache's files aside, rebuilding from the ledger, then putting back what the ledger lost", "fork", fork)
		if j, err = h.setAside(ctx, fork); err != nil {
			return nil, fmt.Errorf("heal: %w", err)
		}
	} else {
		h.log.Warn("finishing an interrupted heal", "stamp", j.Stamp)
	}
	hd := &Healed{Fork: j.Fork, Common: j.Common, SetAside: len(j.Entries), Gone: j.Gone,
		KeptIn: ledger.StateDir + "/" + ConflictsDir + "/" + j.Stamp, Republish: []string{}, Local: []string{}, Deleted: []string{}, Kept: []string{}}
	if hd.Gone == nil {
		hd.Gone = []string{}
	}
	if !j.Rebuilt {
		info, err := h.cfg.Log.Info(ctx)
		if err != nil {
			return hd, fmt.Errorf("heal: read ledger info: %w", err)
		}
		if err := h.rebuild(ctx, info, RebuildOptions{Lazy: opt.lazy, Progress: opt.progress}, &hd.Rebuild); err != nil {
			return hd, fmt.Errorf("heal: %w (this cache's files are kept under %s; a sync finishes the heal)", err, hd.KeptIn)
		}
		j.Rebuilt = true
		if err := h.writeHeal(j); err != nil {
			return hd, err
		}
	}
	if err := h.putBack(j, opt, hd); err != nil {
		return hd, fmt.Errorf("heal: %w (the files not put back are under %s; a sync finishes the heal)", err, hd.KeptIn)
	}
	if err := os.Remove(h.dir.StatePath(healFile)); err != nil {
		return hd, fmt.Errorf("heal: %w", err)
	}
	fsx.RemoveEmptyDirs(filepath.Join(h.dir.StatePath(ConflictsDir), j.Stamp))
	if len(hd.Kept) == 0 {
		hd.KeptIn = ""
	}
	h.log.Warn("healed: the cache is the ledger's, with what the ledger lost put back to republish",
		"common", hd.Common, "republish", len(hd.Republish), "deleted", len(hd.Deleted), "same", hd.Same, "kept", len(hd.Kept), "gone", len(hd.Gone))
	return hd, nil
}

// common finds the fork point (step 1): the largest seq among the commits
// recorded at the marks and the top commit that the log still holds (0 if
// none). A log restored from an older backup is a prefix of this cache's
// history and then other commits, so the commits it holds are those up to
// some seq: a binary search asks about log₂ of them.
func (h *Host) common(ctx context.Context) (ledger.Seq, error) {
	var known []statedb.Commit
	if c, err := h.db.TopCommit(); err != nil {
		return 0, err
	} else if c.Known() {
		known = append(known, c)
	}
	err := h.db.MarkCommits(func(_ string, c statedb.Commit) bool {
		known = append(known, c)
		return true
	})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(known, func(a, b statedb.Commit) int { return cmp.Compare(a.Seq, b.Seq) })
	known = slices.CompactFunc(known, func(a, b statedb.Commit) bool { return a.Seq == b.Seq })
	var ferr error
	i := sort.Search(len(known), func(i int) bool {
		if ferr != nil {
			return true
		}
		err := h.checkCommit(ctx, known[i], known[i].Seq, 0)
		var fe *ForkError
		if errors.As(err, &fe) {
			return true
		}
		ferr = err
		return err != nil
	})
	if ferr != nil {
		return 0, ferr
	}
	if i == 0 {
		return 0, nil
	}
	return known[i-1].Seq, nil
}

// setAside is step 2: the journal written, then each file moved aside.
func (h *Host) setAside(ctx context.Context, fork *ForkError) (*healJournal, error) {
	common, err := h.common(ctx)
	if err != nil {
		return nil, err
	}
	// Nothing past the log's last seq is the ledger's, whatever a lagging
	// answer said of a commit there.
	b, err := h.cfg.Log.Bounds(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the log's bounds: %w", err)
	}
	common = min(common, b.Last)
	s, err := h.load(ctx, false)
	if err != nil {
		return nil, err
	}
	sc, err := h.scan(s, partitionFilter(nil), nil, nil, scanBound{})
	if err != nil {
		return nil, err
	}
	j := &healJournal{Stamp: h.cfg.Now().UTC().Format("20060102T150405.000000000Z"), Common: common, Fork: fork}
	seen := map[string]bool{}
	for _, e := range sc.changes {
		seen[e.Path] = true
		if e.Deleted {
			row, ok, err := h.rows.Get(e.Path)
			if err != nil {
				return nil, err
			}
			if ok {
				j.Old = append(j.Old, healOldRow{Path: e.Path, SHA256: row.Digest, Seq: row.Seq})
			}
		}
		j.Entries = append(j.Entries, healEntry{Path: e.Path, Local: true, Deleted: e.Deleted, SHA256: e.SHA256, Size: e.Size, Mode: e.Mode})
	}
	ign, err := h.dir.Ignore()
	if err != nil {
		return nil, err
	}
	shadowed, err := h.shadowedRows()
	if err != nil {
		return nil, err
	}
	var lazy []healEntry
	err = h.rows.ForEach(func(p string, e statedb.Entry) error {
		if e.Seq <= common || seen[p] || shadowed[p] || ign.Ignored(p) || ignore.IsForced(p) {
			return nil
		}
		he := healEntry{Path: p, SHA256: e.Digest, Size: e.Size, Mode: e.Mode}
		if e.Lazy {
			lazy = append(lazy, he)
			return nil
		}
		j.Entries = append(j.Entries, he)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A lazy row's content, while the blob store has it, is written at its
	// path to be set aside with the rest; otherwise no host may hold it but
	// the one that made it.
	for _, he := range lazy {
		if _, err := os.Lstat(filepath.Join(h.dir.Root(), filepath.FromSlash(he.Path))); err == nil {
			j.Entries = append(j.Entries, he) // a file there after all
			continue
		}
		rc, err := h.cfg.Blobs.Get(ctx, he.SHA256)
		if errors.Is(err, ledger.ErrNotFound) {
			j.Gone = append(j.Gone, he.Path)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fetch %s to keep it: %w", he.Path, err)
		}
		_, err = h.dir.Write(he.Path, rc, he.SHA256, he.Size, he.Mode)
		rc.Close()
		if errors.Is(err, ledger.ErrChecksum) {
			j.Gone = append(j.Gone, he.Path)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fetch %s to keep it: %w", he.Path, err)
		}
		j.Entries = append(j.Entries, he)
	}
	slices.SortFunc(j.Entries, func(a, b healEntry) int { return strings.Compare(a.Path, b.Path) })
	if err := h.writeHeal(j); err != nil {
		return nil, err
	}
	keep := ledger.StateDir + "/" + ConflictsDir + "/" + j.Stamp
	for _, e := range j.Entries {
		if e.Deleted {
			continue
		}
		if err := h.dir.Move(e.Path, keep+"/"+e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("keep %s: %w", e.Path, err)
		}
	}
	if err := h.dir.Flush(nil, pathsOf(j.Entries), h.cfg.Parallel); err != nil {
		return nil, err
	}
	if err := h.syncAside(j); err != nil {
		return nil, err
	}
	return j, nil
}

// syncAside fsyncs the directories the files set aside were moved into, up
// to the state directory: a power cut must not take a file from both places.
func (h *Host) syncAside(j *healJournal) error {
	base := filepath.Join(h.dir.StatePath(ConflictsDir), j.Stamp)
	dirs := map[string]bool{h.dir.StatePath(""): true, h.dir.StatePath(ConflictsDir): true, base: true}
	for _, e := range j.Entries {
		for d := filepath.Dir(filepath.Join(base, filepath.FromSlash(e.Path))); len(d) > len(base); d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := fsx.SyncDir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}

// putBack is step 4.
func (h *Host) putBack(j *healJournal, opt healOptions, hd *Healed) error {
	keep := ledger.StateDir + "/" + ConflictsDir + "/" + j.Stamp
	old := map[string]healOldRow{}
	for _, o := range j.Old {
		old[o.Path] = o
	}
	type verdict uint8
	const (
		back verdict = iota + 1
		same
		kept
		redelete
		drop // a local deletion the ledger's version overrides
	)
	verdicts := make([]verdict, len(j.Entries))
	aside := make([]bool, len(j.Entries))
	for i, e := range j.Entries {
		row, ok, err := h.rows.Get(e.Path)
		if err != nil {
			return err
		}
		if e.Deleted {
			o, had := old[e.Path]
			switch {
			case !ok:
				verdicts[i] = drop // the ledger deleted it too
			case had && row.Digest == o.SHA256 && row.Seq <= j.Common:
				verdicts[i] = redelete
			default:
				verdicts[i] = drop
			}
			continue
		}
		fi, err := os.Lstat(filepath.Join(h.dir.StatePath(""), ConflictsDir, j.Stamp, filepath.FromSlash(e.Path)))
		if errors.Is(err, fs.ErrNotExist) {
			// Put back, or dropped, by the heal this one finishes: put back
			// when the cache holds it where the ledger holds something else.
			d, n, herr := h.dir.Hash(e.Path)
			if herr == nil && d == e.SHA256 && n == e.Size && (!ok || row.Digest != e.SHA256) {
				hd.add(e)
			}
			continue
		}
		if err != nil {
			return err
		}
		aside[i] = fi.Mode().IsRegular()
		switch {
		case !ok:
			verdicts[i] = back
		case row.Digest == e.SHA256 && row.Size == e.Size && row.Mode == e.Mode:
			verdicts[i] = same
		case row.Seq <= j.Common:
			verdicts[i] = back
		default:
			verdicts[i] = kept
		}
	}
	if opt.together != nil {
		// A group goes back whole or stays whole: one member kept keeps all.
		keptGroup := map[string]bool{}
		for i, e := range j.Entries {
			if verdicts[i] == kept {
				if g := opt.together(e.Path); g != "" {
					keptGroup[g] = true
				}
			}
		}
		for i, e := range j.Entries {
			if (verdicts[i] == back || verdicts[i] == same) && aside[i] {
				if g := opt.together(e.Path); g != "" && keptGroup[g] {
					verdicts[i] = kept
				}
			}
		}
	}
	var flush []string
	for i, e := range j.Entries {
		switch verdicts[i] {
		case back:
			if err := h.dir.Move(keep+"/"+e.Path, e.Path); err != nil {
				return fmt.Errorf("put back %s: %w", e.Path, err)
			}
			hd.add(e)
			flush = append(flush, e.Path)
		case same:
			if err := os.Remove(filepath.Join(h.dir.StatePath(""), ConflictsDir, j.Stamp, filepath.FromSlash(e.Path))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			hd.Same++
		case kept:
			hd.Kept = append(hd.Kept, e.Path)
		case redelete:
			if err := h.dir.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete %s again: %w", e.Path, err)
			}
			hd.Deleted = append(hd.Deleted, e.Path)
			flush = append(flush, e.Path)
		}
	}
	if len(flush) > 0 {
		if err := h.dir.Flush(nil, flush, h.cfg.Parallel); err != nil {
			return err
		}
	}
	return nil
}

// add lists e as put back: to republish, or a local change.
func (hd *Healed) add(e healEntry) {
	if e.Local {
		hd.Local = append(hd.Local, e.Path)
	} else {
		hd.Republish = append(hd.Republish, e.Path)
	}
}

// readHeal reads the journal of an interrupted heal (nil if none).
func (h *Host) readHeal() (*healJournal, error) {
	b, err := os.ReadFile(h.dir.StatePath(healFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j healJournal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("read %s: %w", h.dir.StatePath(healFile), err)
	}
	return &j, nil
}

// writeHeal writes the journal durably (temp file, fsync, rename, directory
// fsync).
func (h *Host) writeHeal(j *healJournal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if err := fsx.WriteDurably(h.dir.StatePath(""), healFile, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}); err != nil {
		return fmt.Errorf("write the heal's journal: %w", err)
	}
	return nil
}

func pathsOf(es []healEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Path
	}
	return out
}

// healSync is a sync that found the fork (or an interrupted heal): the heal,
// then, unless opt.NoRepublish, the commit that republishes what it put back.
func (h *Host) healSync(ctx context.Context, opt SyncOptions, fork *ForkError) (SyncResult, error) {
	ho := healOptions{lazy: opt.Lazy, together: opt.Together}
	if opt.Progress != nil {
		ho.progress = func(p Progress) {
			opt.Progress(SyncResult{Events: int(p.Events), Written: p.Files, Bytes: p.Bytes})
		}
	}
	hd, err := h.heal(ctx, ho, fork)
	if hd == nil {
		return SyncResult{}, err
	}
	rr := hd.Rebuild
	res := rr.Replay
	res.Rebuilt, res.Healed = true, hd
	res.Written += rr.Restored
	res.Deleted += rr.Removed
	res.Lazy += rr.Lazy
	res.Bytes += rr.Bytes
	if err != nil || opt.NoRepublish {
		return res, err
	}
	if err := h.Republish(ctx, hd); err != nil {
		return res, err
	}
	res.HWM = max(res.HWM, hd.Published.HWM)
	return res, nil
}

// RepublishMessage is the message of the commit that republishes what a
// heal put back.
const RepublishMessage = "republish: commits the ledger lost (a server restored from an older backup), from this host's cache"

// Republish commits the files of lost commits a heal put back
// (hd.Republish), and records the commit in hd.Published. Nothing to commit
// is no commit.
func (h *Host) Republish(ctx context.Context, hd *Healed) error {
	paths := hd.Republish
	if len(paths) == 0 {
		hd.Published = &CommitResult{Nothing: true}
		return nil
	}
	cr, err := h.Commit(ctx, CommitOptions{Message: RepublishMessage, Paths: paths})
	hd.Published = &cr
	if err != nil {
		return fmt.Errorf("republish what the ledger lost: %w (the files stay in the cache, uncommitted)", err)
	}
	h.log.Warn("republished what the ledger lost", "files", cr.Written, "deleted", cr.Deleted, "commit", cr.Commit)
	return nil
}

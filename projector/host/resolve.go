package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

// ConflictsDir is the directory, under the cache's state directory, where
// 'resolve --theirs' keeps this host's copies: conflicts/<time>/<path>.
const ConflictsDir = "conflicts"

// conflicts returns the paths of dirty (the cache's uncommitted changes) that
// the ledger has changed to something else since this host last read their
// partitions: what neither a commit nor a sync can settle alone.
func (h *Host) conflicts(ctx context.Context, s *session, dirty []ledger.Entry) ([]string, error) {
	recs, err := h.partitionTails(ctx, &run{h: h, s: s, res: &SyncResult{}}, dirty)
	if err != nil {
		return nil, err
	}
	return append([]string{}, projector.Conflicts(dirty, recs)...), nil
}

// Conflicts returns the cache's conflicts (see Status.Conflicts).
func (h *Host) Conflicts(ctx context.Context) ([]string, error) {
	release, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := h.load(ctx, false)
	if err != nil {
		return nil, err
	}
	sc, err := h.scan(s, partitionFilter(nil), nil, nil, scanBound{})
	if err != nil {
		return nil, err
	}
	return h.conflicts(ctx, s, sc.changes)
}

// ResolveOptions say which side of a conflict wins.
type ResolveOptions struct {
	// Paths to resolve: paths with uncommitted local changes. All takes every
	// conflict instead.
	Paths []string
	All   bool
	// Mine commits this host's version on top of the ledger's; otherwise the
	// ledger's version is taken and this host's copy kept under
	// .syncledger/conflicts/<time>/.
	Mine    bool
	Message string // commit message for Mine
	// Discard, without Mine, takes the ledger's version and keeps no copy of
	// this host's: for files the caller writes again anyway (swamp's
	// regenerated files, swamp/renumber.go).
	Discard bool
}

// ResolveResult says what a resolve did.
type ResolveResult struct {
	Paths []string `json:"paths"`
	// Kept is where this host's copies were moved (--theirs): the directory
	// under which each path keeps its name. Empty when no file was kept (a
	// local deletion has no copy).
	Kept   string        `json:"kept,omitempty"`
	Sync   SyncResult    `json:"sync"`
	Commit *CommitResult `json:"commit,omitempty"`
}

// Resolve settles conflicts between this host's uncommitted changes and the
// ledger. For each path it moves this host's copy aside (under
// .syncledger/conflicts/<time>/), puts back the version the index records, and
// syncs the paths' partitions, which now take the ledger's version cleanly.
// With Mine it then puts this host's copy back over the ledger's and commits
// just those paths: the local version lands on top of the remote one, and
// nothing is lost either way. If the sync fails, this host's copies are put
// back (Mine) or stay where they were moved (and the error says where).
//
// All conflicting paths of a partition must be resolved together (or with
// All): the sync stops at any other.
func (h *Host) Resolve(ctx context.Context, opt ResolveOptions) (ResolveResult, error) {
	var res ResolveResult
	release, err := h.acquire(ctx)
	if err != nil {
		return res, err
	}
	defer release()
	s, err := h.load(ctx, false)
	if err != nil {
		return res, err
	}
	sc, err := h.scan(s, partitionFilter(nil), nil, nil, scanBound{})
	if err != nil {
		return res, err
	}
	dirty := map[string]ledger.Entry{}
	for _, e := range sc.changes {
		dirty[e.Path] = e
	}
	paths := slices.Clone(opt.Paths)
	if opt.All {
		if paths, err = h.conflicts(ctx, s, sc.changes); err != nil {
			return res, err
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	for _, p := range paths {
		if _, ok := dirty[p]; !ok {
			return res, fmt.Errorf("resolve %s: %w", p, ErrNoChange)
		}
	}
	res.Paths = paths
	if len(paths) == 0 {
		return res, nil
	}

	// Move this host's copies aside, and put back what the index records.
	stamp := h.cfg.Now().UTC().Format("20060102T150405.000000000Z")
	keep := filepath.Join(h.dir.StatePath(ConflictsDir), stamp)
	keepRel := ledger.StateDir + "/" + ConflictsDir + "/" + stamp // keep, relative to the cache root
	var moved []string
	for _, p := range paths {
		if dirty[p].Deleted || opt.Discard && !opt.Mine {
			continue // a local deletion, or a copy not wanted
		}
		if err := h.dir.Move(p, keepRel+"/"+p); err != nil {
			return res, fmt.Errorf("resolve %s: keep this host's copy: %w", p, err)
		}
		moved = append(moved, p)
		h.log.Info("kept this host's copy", "path", p, "at", filepath.Join(keep, filepath.FromSlash(p)))
	}
	if len(moved) > 0 {
		res.Kept = keep
	}
	back := func() error { // put this host's copies back over whatever is there
		var errs []error
		for _, p := range moved {
			if err := h.dir.Move(keepRel+"/"+p, p); err != nil {
				errs = append(errs, fmt.Errorf("put back %s from %s: %w", p, keep, err))
			}
		}
		res.Kept = ""
		return errors.Join(errs...)
	}
	for _, p := range paths {
		f, ok, err := s.core.File(p)
		if err != nil {
			return res, fmt.Errorf("resolve %s: %w", p, err)
		}
		shadowed, err := s.core.Shadowed(p)
		if err != nil {
			return res, fmt.Errorf("resolve %s: %w", p, err)
		}
		if !ok || f.Lazy || shadowed {
			if err := h.dir.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return res, fmt.Errorf("resolve %s: %w", p, err)
			}
			continue
		}
		if err := h.restoreIndexed(ctx, p, f); err != nil {
			return res, fmt.Errorf("resolve %s: restore the indexed version: %w (this host's copies are under %s)", p, err, keep)
		}
	}

	parts := map[string]bool{}
	for _, p := range paths {
		parts[ledger.PartitionKey(p)] = true
	}
	res.Sync, err = h.Sync(ctx, SyncOptions{Partitions: slices.Sorted(maps.Keys(parts))})
	if err != nil {
		if opt.Mine {
			if berr := back(); berr != nil {
				err = errors.Join(err, berr)
			}
		} else if res.Kept != "" {
			err = fmt.Errorf("%w (this host's copies are under %s)", err, res.Kept)
		}
		return res, fmt.Errorf("resolve: %w", err)
	}
	if !opt.Mine {
		return res, nil
	}
	if err := back(); err != nil {
		return res, fmt.Errorf("resolve: %w", err)
	}
	for _, p := range paths {
		if dirty[p].Deleted {
			if err := h.dir.Remove(p); err != nil {
				return res, fmt.Errorf("resolve %s: delete again: %w", p, err)
			}
		}
	}
	msg := opt.Message
	if msg == "" {
		msg = "resolve --mine " + strings.Join(paths, " ")
	}
	cr, err := h.Commit(ctx, CommitOptions{Message: msg, Paths: paths, Partitions: slices.Sorted(maps.Keys(parts))})
	res.Commit = &cr
	if err != nil {
		return res, fmt.Errorf("resolve: commit this host's version: %w", err)
	}
	return res, nil
}

// restoreIndexed writes the indexed version f at path, durably.
func (h *Host) restoreIndexed(ctx context.Context, path string, f projector.File) error {
	rc, err := h.blobsPort().Get(ctx, f.SHA256)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = h.dir.Write(path, rc, f.SHA256, f.Size, f.Mode)
	return err
}

// resolveHint is what a conflict error says to do: settle it either way.
const resolveHint = "keep this host's version on top (resolve mine), or take the ledger's (resolve theirs: this host's copy is kept under " +
	ledger.StateDir + "/" + ConflictsDir + "/)"

// ShellQuote quotes p for a POSIX shell when it needs it.
func ShellQuote(p string) string {
	if p != "" && strings.IndexFunc(p, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '@' || r == '+' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

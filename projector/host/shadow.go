package host

import (
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/statedb"
)

// blockedError: a file the Ready must write has something in its way that the
// Ready does not remove — a directory holding files the ledger does not know,
// or a file of the ledger's directory name that it does not know: local files,
// reported as a local change naming them.
type blockedError struct{ path string }

func (e *blockedError) Error() string { return "blocked by local file " + e.path }

// blockedBy returns the path a *blockedError names.
func blockedBy(err error) (string, bool) {
	var b *blockedError
	if errors.As(err, &b) {
		return b.path, true
	}
	return "", false
}

// inspectChange is inspect for one Change of rd, aware of the directory-wins
// rule (projector.OpShadow): a directory where the Ready keeps a shadowed file,
// or where the Ready writes a file once it has removed what lies under it, is
// no file (absent); so is a path under a file that the Ready removes. Files an
// interrupted apply left in the way (journalled, see session.leftover) are
// the ledger's and come back when their events apply: they are removed. Any
// other file in the way of a write fails with a *blockedError.
func (h *Host) inspectChange(st *cachefs.Stater, s *session, rd projector.Ready, ch projector.Change, row statedb.Entry, hasRow bool) (diskState, error) {
	ds, err := h.inspect(st, ch.Path, row, hasRow)
	switch {
	case errors.Is(err, cachefs.ErrIsDir):
		if ch.Op != projector.OpWrite {
			return diskState{}, nil // the file stays shadowed, or goes: the directory stays
		}
		// The file comes back where a directory is: what the Ready removes
		// goes, and so do leftovers; anything else holds files the ledger
		// does not know, which block the write.
		return diskState{}, h.clearLeftovers(s, rd, ch.Path)
	case errors.Is(err, cachefs.ErrNotDir):
		a, file := h.fileAbove(ch.Path)
		if !file || ch.Op != projector.OpWrite {
			return diskState{}, nil
		}
		return diskState{}, h.clearLeftovers(s, rd, a)
	}
	return ds, err
}

// clearLeftovers makes way for a write at or under path: it removes the file
// at path, or the files under the directory path, that an interrupted apply
// left (the journal says so and the content matches: the ledger's, written
// again when their events apply), and the directories that empties. A file
// rd removes is left to rd. Any other file fails with a *blockedError naming it.
func (h *Host) clearLeftovers(s *session, rd projector.Ready, path string) error {
	files, err := h.dir.Files(path)
	if err != nil {
		return err
	}
	var blocker string
	for _, f := range files {
		if removes(rd, f) {
			continue
		}
		j, ok := s.journal[f]
		if ok {
			d, _, err := h.dir.Hash(f)
			ok = err == nil && j.Matches(true, d)
		}
		if !ok {
			if blocker == "" {
				blocker = f
			}
			continue
		}
		if err := h.dir.Remove(f); err != nil {
			return err
		}
	}
	if blocker != "" {
		return &blockedError{blocker}
	}
	if len(files) == 0 {
		_ = h.dir.RemoveDir(path) // an empty directory (its last file deleted by this host)
	}
	return nil
}

// fileAbove returns the nearest parent of path that the cache holds as a file.
func (h *Host) fileAbove(path string) (string, bool) {
	for i := strings.LastIndexByte(path, '/'); i > 0; i = strings.LastIndexByte(path[:i], '/') {
		if _, err := h.dir.Stat(path[:i]); err == nil {
			return path[:i], true
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, cachefs.ErrIsDir) && !errors.Is(err, cachefs.ErrNotDir) {
			return "", false
		}
	}
	return "", false
}

// removes reports whether rd removes any file at path from the cache.
func removes(rd projector.Ready, path string) bool {
	i, ok := slices.BinarySearchFunc(rd.Changes, path, func(ch projector.Change, p string) int { return strings.Compare(ch.Path, p) })
	if !ok {
		return false
	}
	switch rd.Changes[i].Op {
	case projector.OpDelete, projector.OpLazy, projector.OpShadow:
		return true
	}
	return false
}

// shadowedRows returns the index's shadowed files (projector.Core.Shadowed)
// without loading a core.
func (h *Host) shadowedRows() (map[string]bool, error) {
	var paths []string
	if err := h.rows.ForEach(func(p string, _ statedb.Entry) error { paths = append(paths, p); return nil }); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range projector.ShadowedPaths(paths) {
		out[p] = true
	}
	return out, nil
}

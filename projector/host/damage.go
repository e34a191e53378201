package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/statedb"
)

// A damaged state database (statedb.ErrCorrupt) fails every operation but
// Rebuild, which starts the state over (issue 26 point 7):
//
//  1. checkState checks the database whole (statedb.DB.Check); a damaged one
//     is set aside (state.db.damaged-<time>) and a new one started, marked
//     Recovering with the directory conflicts/<time>/ (and Restoring, so that
//     a sync finishes the rebuild too). From here a crash leaves a state
//     only a rebuild uses (loadLocal refuses it to every other operation).
//  2. The rebuild restores the newest snapshot and replays the log as any
//     rebuild does, except that the index cannot tell a local edit from an
//     older version of the ledger's: every file in the way of the ledger's
//     version is moved to that directory (keepAside) and the ledger's
//     written.
//  3. Then every file the ledger does not hold (a new file, or one the
//     ledger deleted since this host last synced) is moved there too, the
//     copies that equal the cache's file of their path are dropped, and
//     Recovering is cleared. The cache is then the ledger's, and nothing the
//     host held is lost: what differs is under .syncledger/conflicts/<time>/.

// checkState, at the start of a Rebuild that is not part of another operation
// of this Host, checks the state database and starts it over if it is
// damaged (step 1 above). It returns the name the damaged file was set aside
// under ("" when it was not damaged).
func (h *Host) checkState() (string, error) {
	if h.held > 0 && h.base == nil {
		return "", nil // inside another operation (a sync finishing a rebuild): checked or started over already
	}
	h.Release() // the hold Open took: the check needs the database closed after it
	if h.held > 0 {
		return "", nil
	}
	path := h.dir.StatePath("state.db")
	db, err := statedb.Open(path, h.cfg.LockWait)
	if err == nil {
		err = db.Check()
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}
	if !errors.Is(err, statedb.ErrCorrupt) {
		return "", err
	}
	h.log.Warn("the state database is damaged: setting it aside and rebuilding the state from the ledger", "err", err)
	now := h.cfg.Now()
	damaged, err := statedb.SetAside(path, now)
	if err != nil {
		return "", fmt.Errorf("rebuild: %w", err)
	}
	if db, err = statedb.Open(path, h.cfg.LockWait); err != nil {
		return "", fmt.Errorf("rebuild: start a new state: %w", err)
	}
	keep := filepath.Join(ConflictsDir, now.UTC().Format("20060102T150405.000000000Z"))
	err = db.SetRecovering(filepath.ToSlash(keep))
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("rebuild: start a new state: %w", err)
	}
	return damaged, nil
}

// errRecovering is any operation but Rebuild on a state started over after
// damage whose rebuild has not finished.
func (h *Host) errRecovering() error {
	return &statedb.CorruptError{Path: h.dir.StatePath("state.db"), Reason: "it was started over and its rebuild did not finish"}
}

// keepAside moves the cache's files at paths to h.keepDir under the same
// relative paths (step 2 above).
func (h *Host) keepAside(paths []string) error {
	keepRel, err := filepath.Rel(h.dir.Root(), h.keepDir)
	if err != nil {
		return err
	}
	keepRel = filepath.ToSlash(keepRel)
	for _, p := range paths {
		dst := filepath.Join(h.keepDir, filepath.FromSlash(p))
		if err := h.dir.Move(p, keepRel+"/"+p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("keep %s: %w", p, err)
		}
		h.log.Warn("the state was damaged: keeping this file, which differs from the ledger, aside", "path", p, "kept", dst)
	}
	return nil
}

// finishRecovery is step 3 above, once the rebuild replayed the log to its
// head: it returns the paths kept aside that differ from the cache's files.
func (h *Host) finishRecovery(ctx context.Context, s *session) ([]string, error) {
	sc, err := h.scan(s, partitionFilter(nil), nil, nil, scanBound{})
	if err != nil {
		return nil, err
	}
	var stray []string
	for _, e := range sc.changes {
		if !e.Deleted {
			stray = append(stray, e.Path)
		}
	}
	if err := h.keepAside(stray); err != nil {
		return nil, err
	}
	var kept []string
	err = filepath.WalkDir(h.keepDir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == h.keepDir {
			return filepath.SkipAll // nothing was kept
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(h.keepDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if same, err := h.sameAsCache(p, rel); err != nil || same {
			if err == nil {
				err = os.Remove(p) // the ledger's content: nothing to keep
			}
			return err
		}
		kept = append(kept, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rebuild: sort the files kept aside: %w", err)
	}
	fsx.RemoveEmptyDirs(h.keepDir)
	if err := h.db.ClearRecovering(); err != nil {
		return nil, err
	}
	return kept, nil
}

// sameAsCache reports whether the file at abs holds what the cache holds at
// rel.
func (h *Host) sameAsCache(abs, rel string) (bool, error) {
	f, err := os.Open(abs)
	if err != nil {
		return false, err
	}
	defer f.Close()
	d, n, err := cachefs.HashReader(f)
	if err != nil {
		return false, err
	}
	cd, cn, err := h.dir.Hash(rel)
	if err != nil {
		return false, nil // not in the cache (or not readable there): keep the copy
	}
	return d == cd && n == cn, nil
}

package cachefs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/syncledger/syncledger/ledger"
)

// Stater answers Stat for many paths, checking each directory on the way once
// (a Ready's paths share most of theirs): one lstat per directory per pass, not
// one per path and level, and none below a directory found missing. It is for
// one pass over a set of paths; what it learnt about a directory may be stale
// after the pass, as any Stat may be by the time the caller acts on it.
//
// A Stater is safe for concurrent use: the parallel steps of one pass (a
// commit's hashing, an apply's fetches) share one.
type Stater struct {
	d    *Dir
	mu   sync.Mutex
	dirs map[string]error // slash-separated directory → nil (a real directory), fs.ErrNotExist, or why it is unsafe
}

// staterDirs bounds what a Stater remembers: past it, it forgets every
// directory and checks them again as the pass meets them, so that a pass over
// a million files in swamp's one-directory-per-version layout does not hold
// two million directories. Forgetting costs lstats, never correctness: each
// answer comes from the file system.
const staterDirs = 1 << 16

// remember records what a check found of dir (s.mu held).
func (s *Stater) remember(dir string, err error) {
	if len(s.dirs) >= staterDirs {
		clear(s.dirs)
	}
	s.dirs[dir] = err
}

// NewStater returns a Stater for one pass.
func (d *Dir) NewStater() *Stater { return &Stater{d: d, dirs: map[string]error{}} }

// checkDir is Dir.checkDir, asked once per directory per pass.
func (s *Stater) checkDir(dir string) error {
	s.mu.Lock()
	err, seen := s.dirs[dir]
	s.mu.Unlock()
	if !seen {
		err = s.d.checkDir(dir)
		s.mu.Lock()
		s.remember(dir, err)
		s.mu.Unlock()
	}
	return err
}

// Walked records that the directories on rel's path are real directories, as
// a walk of this pass (Scan) just found them: a walk enters only real
// directories, never a symlink. The pass then does not check them again.
func (s *Stater) Walked(rel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] != '/' {
			continue
		}
		if _, seen := s.dirs[rel[:i]]; seen {
			return // and so are the ones above it
		}
		s.remember(rel[:i], nil)
	}
}

// parents checks the directories on rel's path (rel validated) and returns
// the missing ones, outermost first, as Dir.resolve does.
func (s *Stater) parents(rel string) ([]string, error) {
	return missingParents(rel, s.checkDir)
}

// Stat is Dir.Stat.
func (s *Stater) Stat(rel string) (FileInfo, error) {
	if err := ledger.ValidatePath(rel); err != nil {
		return FileInfo{}, fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	missing, err := s.parents(rel)
	if err != nil {
		return FileInfo{}, err
	}
	if missing != nil {
		return FileInfo{}, fs.ErrNotExist
	}
	fi, err := s.d.lstat(rel)
	if err != nil {
		return FileInfo{}, err
	}
	if fi.IsDir() {
		return FileInfo{}, fmt.Errorf("path %q %w", rel, ErrIsDir)
	}
	if !fi.Mode().IsRegular() {
		return FileInfo{}, fmt.Errorf("stat %s: not a regular file: %w", rel, ErrUnsafePath)
	}
	return FileInfo{Size: fi.Size(), ModTime: fi.ModTime(), Mode: uint32(fi.Mode().Perm())}, nil
}

// Open is Dir.Open, the directories on the way checked once per pass.
func (s *Stater) Open(rel string) (*os.File, error) {
	if _, err := s.Stat(rel); err != nil {
		return nil, err
	}
	return s.d.openNoFollow(rel)
}

// WriteDeferred is Dir.WriteDeferred, the directories on the way checked once
// per pass (and those it creates remembered).
func (s *Stater) WriteDeferred(rel string, r io.Reader, want ledger.Digest, size int64, mode uint32) (FileInfo, error) {
	if err := ledger.ValidatePath(rel); err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w: %w", rel, ErrUnsafePath, err)
	}
	missing, err := s.parents(rel)
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	if missing == nil {
		if fi, err := s.d.lstat(rel); err == nil && fi.IsDir() {
			return FileInfo{}, fmt.Errorf("write %s: path %q %w", rel, rel, ErrIsDir)
		}
	}
	return s.d.writeAt(rel, missing, r, want, size, mode, false, func(dir string) {
		s.mu.Lock()
		s.remember(dir, nil)
		s.mu.Unlock()
	})
}

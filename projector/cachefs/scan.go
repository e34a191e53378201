package cachefs

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/ignore"
)

// Skipped is a file the scan did not consider, and why. Ignored is set for a
// path the ignore rules leave out (package ignore; a directory's Path ends in
// "/"): not a problem, only listed on request. Any other Skipped is a path
// that is not synced: a symlink or other special file, a directory the scan
// cannot read (permissions, a path longer than the OS takes), a file it cannot
// stat. Nothing at or below such a path was seen, so a caller must not take
// the indexed files there for deletions (Unsynced).
type Skipped struct {
	Path    string
	Reason  string
	Ignored bool
}

// Scan walks the cache and calls fn for every regular file that syncs (not
// internal, not in .syncledger/, not ignored, a valid path). It does not descend
// into ignored directories or nested state directories. Symlinks and other
// special files are not followed; they and ignored paths are reported through
// skip.
func (d *Dir) Scan(fn func(rel string, fi FileInfo) error, skip func(Skipped)) error {
	ign, err := d.Ignore()
	if err != nil {
		return err
	}
	return d.ScanWith(ign, nil, fn, skip)
}

// ScanWith is Scan with the ignore rules the caller read (Ignore), so that a
// scan that needs them too reads and parses them once. enter, when not nil,
// limits the walk to the directories it returns true for (a relative path):
// what it leaves out is not walked and not reported at all.
func (d *Dir) ScanWith(ign *ignore.Matcher, enter func(dir string) bool, fn func(rel string, fi FileInfo) error, skip func(Skipped)) error {
	visit := d.visit(ign, fn, skip)
	if enter != nil {
		inner := visit
		visit = func(p string, e fs.DirEntry, err error) error {
			if e != nil && e.IsDir() && p != d.root && !enter(filepath.ToSlash(strings.TrimPrefix(p, d.root+string(filepath.Separator)))) {
				return filepath.SkipDir
			}
			return inner(p, e, err)
		}
	}
	return d.walk("", visit)
}

// ScanPaths is Scan limited to paths (slash-separated, relative to the root): a
// path that is a file is reported as Scan reports it, a directory is walked as
// Scan walks the cache, and a path that is absent, or below a directory Scan
// does not enter (ignored, internal, the state directory, a symlink or not a
// directory), is not reported. A commit from a dirty set (package dirty) checks
// its paths with it. Each file is reported once, however often paths name it.
// Skipped paths below the given ones go to skip; of the given paths' parents,
// only one that is not synced (a symlink or other special file, or one that
// cannot be read: what it holds was not seen) is reported as skipped, never
// an ignored or absent one.
// The ignore rules are ign (Ignore).
func (d *Dir) ScanPaths(ign *ignore.Matcher, paths []string, fn func(rel string, fi FileInfo) error, skip func(Skipped)) error {
	visit := d.visit(ign, fn, skip)
	enterable := map[string]bool{} // directory → Scan enters it
	var canEnter func(dir string) bool
	canEnter = func(dir string) bool {
		if dir == "" {
			return true
		}
		if ok, seen := enterable[dir]; seen {
			return ok
		}
		parent, _ := path.Split(dir)
		ok := canEnter(strings.TrimSuffix(parent, "/"))
		if ok {
			switch {
			case dir == ledger.StateDir || dir == "_index" || dir == "_control", ign.Match(dir, true):
				ok = false
			default:
				fi, err := d.lstat(dir)
				ok = err == nil && fi.IsDir()
				switch {
				case ok, skip == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
				case err != nil:
					skip(Skipped{Path: dir, Reason: "cannot be read: " + unwrapPath(err).Error()})
				case !fi.Mode().IsRegular():
					skip(Skipped{Path: dir, Reason: "not a regular file (" + fi.Mode().Type().String() + ")"})
				}
			}
		}
		enterable[dir] = ok
		return ok
	}
	// Each path once, a directory before the paths under it: a path listed
	// twice, or inside a listed directory, is reported once.
	paths = slices.Clone(paths)
	for i, rel := range paths {
		paths[i] = strings.Trim(rel, "/")
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	var done []string // directories walked: their subtrees are covered
	for _, rel := range paths {
		if rel == "" || rel == "." {
			return d.walk("", visit)
		}
		if slices.ContainsFunc(done, func(dir string) bool { return strings.HasPrefix(rel, dir+"/") }) {
			continue
		}
		parent, _ := path.Split(rel)
		if !canEnter(strings.TrimSuffix(parent, "/")) {
			continue
		}
		fi, err := d.lstat(rel)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			if skip != nil {
				skip(Skipped{Path: rel, Reason: "cannot be read: " + unwrapPath(err).Error()})
			}
			continue
		}
		if fi.IsDir() {
			done = append(done, rel)
		}
		if err := d.walk(rel, visit); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// visit is Scan's filepath.WalkDirFunc. A path the walk cannot read (a
// directory it cannot list, a file it cannot stat) is reported through skip
// and left out, its subtree with it: one such path never stops the scan of
// the others. Only the cache root itself failing is an error.
func (d *Dir) visit(ign *ignore.Matcher, fn func(rel string, fi FileInfo) error, skip func(Skipped)) fs.WalkDirFunc {
	return func(p string, e fs.DirEntry, err error) error {
		if p == d.root {
			return err
		}
		// A copy, not a slice of p: what keeps the path (a change, a result)
		// must not keep the cache root's bytes with it, 1M times over.
		rel := strings.Clone(filepath.ToSlash(strings.TrimPrefix(p, d.root+string(filepath.Separator))))
		if err != nil {
			return d.unreadable(rel, e, err, skip)
		}
		if rel == ledger.StateDir {
			return filepath.SkipDir
		}
		if e.IsDir() {
			if rel == "_index" || rel == "_control" {
				return filepath.SkipDir
			}
			if ign.Match(rel, true) {
				if skip != nil {
					skip(Skipped{Path: rel + "/", Reason: "ignored", Ignored: true})
				}
				return filepath.SkipDir
			}
			if err := ledger.ValidatePath(rel); err != nil {
				// No file under it is a path the ledger takes (a reserved
				// name, a name or a path too long for some host): one
				// warning, not one a file.
				if skip != nil {
					skip(Skipped{Path: rel, Reason: err.Error()})
				}
				return filepath.SkipDir
			}
			return nil
		}
		if ign.Match(rel, false) {
			if skip != nil && !ledger.IsInternal(rel) {
				skip(Skipped{Path: rel, Reason: "ignored", Ignored: true})
			}
			return nil
		}
		if ledger.IsInternal(rel) {
			return nil
		}
		if !e.Type().IsRegular() {
			if skip != nil {
				skip(Skipped{Path: rel, Reason: "not a regular file (" + e.Type().String() + ")"})
			}
			return nil
		}
		if err := ledger.ValidatePath(rel); err != nil {
			if skip != nil {
				skip(Skipped{Path: rel, Reason: err.Error()})
			}
			return nil
		}
		fi, err := e.Info()
		if tooLong(err) {
			fi, err = d.lstat(rel) // a name in a directory the walk read whole
		}
		if err != nil {
			return d.unreadable(rel, e, err, skip)
		}
		return fn(rel, FileInfo{Size: fi.Size(), ModTime: fi.ModTime(), Mode: uint32(fi.Mode().Perm())})
	}
}

// unreadable is visit's answer to a path it cannot read (err): nothing if it
// was removed while the walk went on, else a Skipped naming it, and the
// directory's subtree left out.
func (d *Dir) unreadable(rel string, e fs.DirEntry, err error, skip func(Skipped)) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed while we walked
	}
	if skip != nil {
		skip(Skipped{Path: rel, Reason: "cannot be read: " + unwrapPath(err).Error()})
	}
	if e != nil && e.IsDir() {
		return filepath.SkipDir
	}
	return nil
}

// unwrapPath drops an *fs.PathError's operation and path (the path can be
// longer than any message should hold; the Skipped names it).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Unsynced reports whether path is at or below one of the not-synced paths
// of a scan (Skipped, not Ignored; keys without a trailing "/"): a path the
// scan did not see for that reason, which says nothing about whether it is
// still there.
func Unsynced(unsynced map[string]bool, path string) bool {
	if len(unsynced) == 0 {
		return false
	}
	for p := path; ; {
		if unsynced[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

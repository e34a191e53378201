// Package cachefs is the file side of a host's cache: every write and deletion the
// projector makes goes through it, and so does the commit scan.
//
// Writes are atomic: content goes to a temp file under .syncledger/tmp, is
// verified against its SHA-256 while it is copied, fsynced, and renamed over the
// target. A crash, or a power cut, leaves either the old file or the new one,
// never a torn file, and never a file whose content does not match its hash.
// Write is durable when it returns (the target's directories are fsynced too);
// WriteDeferred and RemoveDeferred are durable once Flush has synced their
// paths, so a batch pays one directory fsync per directory, not per file.
// Durability comes from fsync(2) of files and directories only: syncfs(2) does
// not reach every file system (FUSE never receives it).
// On Windows, directories are not synced (see dirSync; what each platform
// promises is in docs/design.md §9).
//
// Paths are validated again on every call (ledger.ValidatePath) and resolved without
// following symlinks: a path that escapes the cache, goes through a symlink, or
// targets .syncledger/ is refused with ErrUnsafePath and nothing is written.
package cachefs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/ignore"
)

// ErrUnsafePath: a path would leave the cache, pass through a symlink or a
// non-directory, or touch the state directory.
var ErrUnsafePath = errors.New("unsafe path")

// ErrIsDir and ErrNotDir wrap ErrUnsafePath for a directory where a file is
// wanted and a non-directory where a directory is: a file and a directory of
// the same name (see projector.OpShadow).
var (
	ErrIsDir  = fmt.Errorf("is a directory in the cache: %w", ErrUnsafePath)
	ErrNotDir = fmt.Errorf("is not a directory: %w", ErrUnsafePath)
)

// Dir is a cache directory.
type Dir struct {
	root string // absolute, symlinks resolved
	tmp  string
}

// FileInfo is what the scan and the index know of a file.
type FileInfo struct {
	Size    int64
	ModTime time.Time
	Mode    uint32 // permission bits
}

// Open opens (creating if needed) the cache directory root.
func Open(root string) (*Dir, error) {
	_, serr := os.Lstat(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("open cache %s: %w", root, err)
	}
	if errors.Is(serr, fs.ErrNotExist) {
		// A new cache directory survives a power cut only once its parent is synced.
		if err := syncFile(filepath.Dir(filepath.Clean(root))); err != nil {
			return nil, fmt.Errorf("open cache %s: %w", root, err)
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", root, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("open cache %s: %w", root, err)
	}
	d := &Dir{root: abs, tmp: filepath.Join(abs, ledger.StateDir, "tmp")}
	if err := os.MkdirAll(d.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("open cache %s: %w", root, err)
	}
	return d, nil
}

// RemoveTemp drops the temp files under .syncledger/tmp: torn writes of a run
// that crashed. Call it only while holding the cache's state lock (statedb):
// every write happens under that lock, so a temp file seen then belongs to no
// running process — without the lock it may be another process's write in
// progress (a watch applying a large file), which would fail at its rename.
func (d *Dir) RemoveTemp() {
	ents, err := os.ReadDir(d.tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		os.Remove(filepath.Join(d.tmp, e.Name()))
	}
}

// Root returns the cache's absolute path.
func (d *Dir) Root() string { return d.root }

// StatePath returns the path of a file inside the state directory.
func (d *Dir) StatePath(name string) string { return filepath.Join(d.root, ledger.StateDir, name) }

// resolve validates rel and checks each existing parent is a real directory (not a
// symlink). It returns the absolute path and the parent directories that are
// missing (outermost first).
func (d *Dir) resolve(rel string) (string, []string, error) {
	if err := ledger.ValidatePath(rel); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	var missing []string
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		dir := rel[:i]
		if missing != nil {
			missing = append(missing, d.abs(dir))
			continue
		}
		switch err := d.checkDir(dir); {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, d.abs(dir))
		case err != nil:
			return "", nil, fmt.Errorf("path %q: %w", rel, err)
		}
	}
	abs := d.abs(rel)
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		return "", nil, fmt.Errorf("path %q %w", rel, ErrIsDir)
	}
	return abs, missing, nil
}

// Check validates rel for writing without touching the disk.
func (d *Dir) Check(rel string) error {
	_, _, err := d.resolve(rel)
	return err
}

// Write stores the content of r at rel, atomically and durably, verifying that it
// hashes to want and has size bytes. On any error nothing is visible at rel (the
// old file, if any, stays).
func (d *Dir) Write(rel string, r io.Reader, want ledger.Digest, size int64, mode uint32) (FileInfo, error) {
	return d.write(rel, r, want, size, mode, true)
}

// WriteDeferred is Write without its directory fsyncs: the content is fsynced
// before the rename, so whatever name survives a power cut holds complete,
// verified content, but the rename (the file being at rel) is durable only once
// Flush has synced rel.
func (d *Dir) WriteDeferred(rel string, r io.Reader, want ledger.Digest, size int64, mode uint32) (FileInfo, error) {
	return d.write(rel, r, want, size, mode, false)
}

// Flush makes durable the content of the files at the paths in files and the
// absence of those in gone (relative, validated), with at most parallel fsyncs
// at a time: it fsyncs each file of files, then each directory on the paths of
// both lists that exists, from the path's parent up to the cache root, once
// each. Whatever wrote or removed them (this process, an interrupted one, the
// user), after Flush they survive a power cut. A file of files found missing
// (the user removed it meanwhile) is flushed as gone: its absence is what the
// cache holds, and what the next scan sees. A file whose content is durable
// already (WriteDeferred fsyncs before its rename) goes in gone too: only the
// directories on its path are synced.
func (d *Dir) Flush(files, gone []string, parallel int) error {
	dirs := map[string]bool{}
	addDirs := func(rel string) {
		for i := len(rel) - 1; i >= 0; i-- {
			if rel[i] == '/' {
				dirs[rel[:i]] = true
			}
		}
		dirs[""] = true
	}
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	for _, rel := range files {
		if err := ledger.ValidatePath(rel); err != nil {
			return fmt.Errorf("flush %s: %w: %w", rel, ErrUnsafePath, err)
		}
		addDirs(rel)
		g.Go(func() error {
			if err := syncFile(d.abs(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("flush %s: %w", rel, err)
			}
			return nil
		})
	}
	for _, rel := range gone {
		if err := ledger.ValidatePath(rel); err != nil {
			return fmt.Errorf("flush %s: %w: %w", rel, ErrUnsafePath, err)
		}
		addDirs(rel)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for dir := range dirs {
		abs := d.root
		if dir != "" {
			abs = d.abs(dir)
		}
		g.Go(func() error {
			err := syncDir(abs)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed with the files under it: its parent holds that
			}
			if err != nil {
				return fmt.Errorf("flush directory %s: %w", abs, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (d *Dir) write(rel string, r io.Reader, want ledger.Digest, size int64, mode uint32, durable bool) (FileInfo, error) {
	abs, missing, err := d.resolve(rel)
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	return d.writeAt(rel, abs, missing, r, want, size, mode, durable, nil)
}

// writeAt is write once rel is resolved; created, when set, is told of each
// directory it made.
func (d *Dir) writeAt(rel, abs string, missing []string, r io.Reader, want ledger.Digest, size int64, mode uint32, durable bool, created func(string)) (FileInfo, error) {
	f, err := os.CreateTemp(d.tmp, "w-*")
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	// A blob store's reader verifies the content already.
	if !ledger.Verifies(r, want) {
		r = ledger.NewVerifyingReader(r, want)
	}
	n, err := ledger.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("content is %d bytes, want %d: %w", n, size, ledger.ErrChecksum)
	}
	if err == nil {
		err = f.Chmod(fs.FileMode(mode & 0o777))
	}
	if err == nil {
		err = f.Sync() // before the rename: no name ever holds content not yet durable
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	for _, dir := range missing {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
		}
		if created != nil {
			created(dir)
		}
	}
	if err := os.Rename(tmp, abs); err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	if durable {
		if err := syncDirs(filepath.Dir(abs), missing, d.root); err != nil {
			return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
		}
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	return FileInfo{Size: fi.Size(), ModTime: fi.ModTime(), Mode: uint32(fi.Mode().Perm())}, nil
}

// syncDirs fsyncs dir and, when directories were created, their parents up to root.
func syncDirs(dir string, created []string, root string) error {
	dirs := []string{dir}
	if len(created) > 0 {
		dirs = append(dirs, filepath.Dir(created[0]))
		dirs = append(dirs, created...)
	}
	seen := map[string]bool{}
	for _, p := range dirs {
		if seen[p] || !strings.HasPrefix(p, root) {
			continue
		}
		seen[p] = true
		if err := syncFile(p); err != nil {
			return err
		}
	}
	return nil
}

// syncFile fsyncs the regular file or directory at p; anything else (a
// symlink, a FIFO the user put there) is left alone: it holds no content of
// the cache, and opening a FIFO would block.
func syncFile(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() || fi.IsDir() && !dirSync {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Remove deletes the file at rel (absent is not an error) and then its parent
// directories that became empty, up to the cache root, durably.
func (d *Dir) Remove(rel string) error { return d.remove(rel, true) }

// RemoveDeferred is Remove made durable by a Flush of rel (in gone).
func (d *Dir) RemoveDeferred(rel string) error { return d.remove(rel, false) }

func (d *Dir) remove(rel string, durable bool) error {
	abs, missing, err := d.resolve(rel)
	if err != nil {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	if missing != nil {
		return nil // a parent is absent, so is the file
	}
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	dir := filepath.Dir(abs)
	for dir != d.root && strings.HasPrefix(dir, d.root) {
		if os.Remove(dir) != nil { // not empty (or gone): stop
			break
		}
		dir = filepath.Dir(dir)
	}
	if !durable {
		return nil
	}
	if err := syncFile(dir); err != nil {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	return nil
}

// Stat returns the file's info; fs.ErrNotExist if absent.
func (d *Dir) Stat(rel string) (FileInfo, error) {
	return d.NewStater().Stat(rel)
}

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
		s.dirs[dir] = err
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
		s.dirs[rel[:i]] = nil
	}
}

// parents checks the directories on rel's path (rel validated) and returns
// the missing ones, outermost first, as Dir.resolve does.
func (s *Stater) parents(rel string) ([]string, error) {
	var missing []string
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		dir := rel[:i]
		if missing != nil {
			missing = append(missing, dir)
			continue
		}
		switch err := s.checkDir(dir); {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, dir)
		case err != nil:
			return nil, fmt.Errorf("path %q: %w", rel, err)
		}
	}
	return missing, nil
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
	fi, err := os.Lstat(s.d.abs(rel))
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
	return os.Open(s.d.abs(rel))
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
	abs := s.d.abs(rel)
	if missing == nil {
		if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
			return FileInfo{}, fmt.Errorf("write %s: path %q %w", rel, rel, ErrIsDir)
		}
	}
	absMissing := make([]string, len(missing))
	for i, dir := range missing {
		absMissing[i] = s.d.abs(dir)
	}
	return s.d.writeAt(rel, abs, absMissing, r, want, size, mode, false, func(abs string) {
		dir := filepath.ToSlash(strings.TrimPrefix(abs, s.d.root+string(filepath.Separator)))
		s.mu.Lock()
		s.dirs[dir] = nil
		s.mu.Unlock()
	})
}

// checkDir reports whether the directory dir (slash-separated, relative) is a
// real directory: nil, fs.ErrNotExist, or an error wrapping ErrUnsafePath.
func (d *Dir) checkDir(dir string) error {
	abs := d.abs(dir)
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fs.ErrNotExist
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("goes through symlink %s: %w", abs, ErrUnsafePath)
	case !fi.IsDir():
		return fmt.Errorf("%s %w", abs, ErrNotDir)
	}
	return nil
}

// abs returns the absolute path of a validated relative path: a validated path
// has no empty, "." or ".." segment, so joining needs no cleaning.
func (d *Dir) abs(rel string) string {
	if filepath.Separator != '/' {
		return filepath.Join(d.root, filepath.FromSlash(rel))
	}
	return d.root + "/" + rel
}

// Open opens the file at rel for reading (no symlinks followed on the way).
func (d *Dir) Open(rel string) (*os.File, error) {
	if _, err := d.Stat(rel); err != nil {
		return nil, err
	}
	return os.Open(filepath.Join(d.root, filepath.FromSlash(rel)))
}

// Hash returns the SHA-256 and size of the file at rel.
func (d *Dir) Hash(rel string) (ledger.Digest, int64, error) {
	f, err := d.Open(rel)
	if err != nil {
		return ledger.Digest{}, 0, err
	}
	defer f.Close()
	dg, n, err := HashReader(f)
	if err != nil {
		return ledger.Digest{}, 0, fmt.Errorf("hash %s: %w", rel, err)
	}
	return dg, n, nil
}

// HashReader returns the SHA-256 and length of r's content, read to its end.
func HashReader(r io.Reader) (ledger.Digest, int64, error) {
	h := sha256.New()
	n, err := ledger.Copy(h, r)
	var dg ledger.Digest
	h.Sum(dg[:0])
	return dg, n, err
}

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

// Ignore returns the cache's ignore rules (its .syncledgerignore after the
// defaults), read now.
func (d *Dir) Ignore() (*ignore.Matcher, error) { return ignore.Load(d.root) }

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
	return d.ScanWith(ign, fn, skip)
}

// ScanWith is Scan with the ignore rules the caller read (Ignore), so that a
// scan that needs them too reads and parses them once.
func (d *Dir) ScanWith(ign *ignore.Matcher, fn func(rel string, fi FileInfo) error, skip func(Skipped)) error {
	return filepath.WalkDir(d.root, d.visit(ign, fn, skip))
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
				fi, err := os.Lstat(d.abs(dir))
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
			return filepath.WalkDir(d.root, visit)
		}
		if slices.ContainsFunc(done, func(dir string) bool { return strings.HasPrefix(rel, dir+"/") }) {
			continue
		}
		parent, _ := path.Split(rel)
		if !canEnter(strings.TrimSuffix(parent, "/")) {
			continue
		}
		fi, err := os.Lstat(d.abs(rel))
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
		if err := filepath.WalkDir(d.abs(rel), visit); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
		rel := filepath.ToSlash(strings.TrimPrefix(p, d.root+string(filepath.Separator)))
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

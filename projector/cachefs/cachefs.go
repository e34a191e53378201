package cachefs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
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
	ign  ignoreCache // Ignore's rules, read again only when their file changed

	rootMu sync.Mutex
	rootFD *os.Root // the root's directory, for paths too long to name whole (long.go); opened on first use
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
// symlink). It returns the parent directories that are missing (relative,
// outermost first).
func (d *Dir) resolve(rel string) ([]string, error) {
	if err := ledger.ValidatePath(rel); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	missing, err := missingParents(rel, d.checkDir)
	if err != nil {
		return nil, err
	}
	if fi, err := d.lstat(rel); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("path %q %w", rel, ErrIsDir)
	}
	return missing, nil
}

// missingParents checks the directories on rel's path, outermost first,
// with checkDir (fs.ErrNotExist: missing; any other error stops), and
// returns the missing ones: once one is missing, every one below it is.
func missingParents(rel string, checkDir func(dir string) error) ([]string, error) {
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
		switch err := checkDir(dir); {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, dir)
		case err != nil:
			return nil, fmt.Errorf("path %q: %w", rel, err)
		}
	}
	return missing, nil
}

// Check validates rel for writing without touching the disk.
func (d *Dir) Check(rel string) error {
	_, err := d.resolve(rel)
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
			if err := d.syncPath(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
		g.Go(func() error {
			err := d.syncDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed with the files under it: its parent holds that
			}
			if err != nil {
				return fmt.Errorf("flush directory %s: %w", d.path(dir), err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (d *Dir) write(rel string, r io.Reader, want ledger.Digest, size int64, mode uint32, durable bool) (FileInfo, error) {
	missing, err := d.resolve(rel)
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	return d.writeAt(rel, missing, r, want, size, mode, durable, nil)
}

// writeAt is write once rel is resolved (missing: the directories to make,
// relative); created, when set, is told of each directory it made.
func (d *Dir) writeAt(rel string, missing []string, r io.Reader, want ledger.Digest, size int64, mode uint32, durable bool, created func(string)) (FileInfo, error) {
	f, err := fsx.CreateTemp(d.tmp, "w-")
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	tmp, renamed := f.Name(), false
	defer func() {
		if !renamed {
			os.Remove(tmp)
		}
	}()
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
	var fi fs.FileInfo
	if err == nil {
		// The rename changes neither the mtime nor the mode: the file's
		// own stat is what the path shows once renamed.
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	for _, dir := range missing {
		if err := d.mkdir(dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
		}
		if created != nil {
			created(dir)
		}
	}
	if err := d.rename(d.tmpRel(tmp), rel); err != nil {
		return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
	}
	renamed = true
	if durable {
		if err := d.syncDirs(parent(rel), missing); err != nil {
			return FileInfo{}, fmt.Errorf("write %s: %w", rel, err)
		}
	}
	return FileInfo{Size: fi.Size(), ModTime: fi.ModTime(), Mode: uint32(fi.Mode().Perm())}, nil
}

// tmpRel is the path, relative to the root, of the temp file tmp (absolute,
// in d.tmp).
func (d *Dir) tmpRel(tmp string) string {
	return ledger.StateDir + "/tmp/" + filepath.Base(tmp)
}

// parent is the directory of rel, relative ("" is the root).
func parent(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// syncDirs fsyncs dir and, when directories were created, their parents up
// to the root (all relative, "" the root).
func (d *Dir) syncDirs(dir string, created []string) error {
	dirs := []string{dir}
	if len(created) > 0 {
		dirs = append(dirs, parent(created[0]))
		dirs = append(dirs, created...)
	}
	seen := map[string]bool{}
	for _, p := range dirs {
		if seen[p] {
			continue
		}
		seen[p] = true
		if err := d.syncPath(p); err != nil {
			return err
		}
	}
	return nil
}

// syncFile fsyncs the regular file or directory at p (absolute); anything
// else is left alone, as Dir.syncPath.
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
	missing, err := d.resolve(rel)
	if err != nil {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	if missing != nil {
		return nil // a parent is absent, so is the file
	}
	if err := d.removeName(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	dir := parent(rel)
	for dir != "" {
		if d.removeName(dir) != nil { // not empty (or gone): stop
			break
		}
		dir = parent(dir)
	}
	if !durable {
		return nil
	}
	if err := d.syncPath(dir); err != nil {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	return nil
}

// Stat returns the file's info; fs.ErrNotExist if absent.
func (d *Dir) Stat(rel string) (FileInfo, error) {
	return d.NewStater().Stat(rel)
}

// checkDir reports whether the directory dir (slash-separated, relative) is a
// real directory: nil, fs.ErrNotExist, or an error wrapping ErrUnsafePath.
func (d *Dir) checkDir(dir string) error {
	abs := d.abs(dir)
	fi, err := d.lstat(dir)
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
	return d.openNoFollow(rel)
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

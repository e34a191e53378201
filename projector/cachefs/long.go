package cachefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
)

// A cache's file operations name a file by its absolute path: one system
// call, the kernel resolving the whole path. A path the system refuses as too
// long for one call (ENAMETOOLONG: PATH_MAX is 4096 bytes on Linux, 1024 on
// macOS, so a ledger path of 3.9 KB under a cache root of a few hundred bytes
// is refused) is named relative to the cache root's directory instead,
// through an os.Root, which opens each directory relative to its parent: a
// path the ledger accepts (ledger.ValidatePath: at most MaxPathLen bytes,
// segments of at most MaxNameLen) is held whatever the root's length (issue 38
// point 9). The fallback costs one failed call and a walk from the root, paid
// only by such paths. On Windows, Go names a long absolute path with the \\?\
// prefix, so it is never needed there.
//
// os.Root follows a symlink that stays inside the root; the callers refuse
// symlinks as before, by lstat of each directory on the way, and an open
// checks that it opened what the lstat saw.

// tooLong reports whether err is the system refusing a path as too long.
func tooLong(err error) bool { return errors.Is(err, syscall.ENAMETOOLONG) }

// osRoot returns the cache root's os.Root, opened on first use.
func (d *Dir) osRoot() (*os.Root, error) {
	d.rootMu.Lock()
	defer d.rootMu.Unlock()
	if d.rootFD == nil {
		r, err := os.OpenRoot(d.root)
		if err != nil {
			return nil, err
		}
		d.rootFD = r
	}
	return d.rootFD, nil
}

// Close releases what the Dir holds open (the cache root's directory, if a
// long path opened it). The Dir stays usable: it opens it again if needed.
func (d *Dir) Close() error {
	d.rootMu.Lock()
	defer d.rootMu.Unlock()
	if d.rootFD == nil {
		return nil
	}
	err := d.rootFD.Close()
	d.rootFD = nil
	return err
}

// inRoot runs op on rel (slash-separated, relative; "" is the root) inside
// the cache root.
func inRoot[T any](d *Dir, rel string, op func(r *os.Root, name string) (T, error)) (T, error) {
	r, err := d.osRoot()
	if err != nil {
		var zero T
		return zero, err
	}
	if rel == "" {
		rel = "."
	}
	return op(r, filepath.FromSlash(rel))
}

// path is the absolute path of rel ("" is the root).
func (d *Dir) path(rel string) string {
	if rel == "" {
		return d.root
	}
	return d.abs(rel)
}

// lstat is os.Lstat of rel.
func (d *Dir) lstat(rel string) (fs.FileInfo, error) {
	fi, err := os.Lstat(d.path(rel))
	if tooLong(err) {
		return inRoot(d, rel, (*os.Root).Lstat)
	}
	return fi, err
}

// mkdir is os.Mkdir of rel, mode 0755.
func (d *Dir) mkdir(rel string) error {
	err := os.Mkdir(d.path(rel), 0o755)
	if tooLong(err) {
		_, err = inRoot(d, rel, func(r *os.Root, name string) (struct{}, error) { return struct{}{}, r.Mkdir(name, 0o755) })
	}
	return err
}

// mkdirAll is os.MkdirAll of rel with mode perm.
func (d *Dir) mkdirAll(rel string, perm fs.FileMode) error {
	err := os.MkdirAll(d.path(rel), perm)
	if tooLong(err) {
		_, err = inRoot(d, rel, func(r *os.Root, name string) (struct{}, error) { return struct{}{}, r.MkdirAll(name, perm) })
	}
	return err
}

// removeName is os.Remove of rel (a file or an empty directory).
func (d *Dir) removeName(rel string) error {
	err := os.Remove(d.path(rel))
	if tooLong(err) {
		_, err = inRoot(d, rel, func(r *os.Root, name string) (struct{}, error) { return struct{}{}, r.Remove(name) })
	}
	return err
}

// rename renames from to to (both relative): rename(2), a file never
// replacing a directory.
func (d *Dir) rename(from, to string) error {
	err := fsx.Rename(d.path(from), d.path(to))
	if tooLong(err) {
		_, err = inRoot(d, from, func(r *os.Root, name string) (struct{}, error) {
			return struct{}{}, r.Rename(name, filepath.FromSlash(to))
		})
	}
	return err
}

// openNoFollow opens the file at rel for reading without following a symlink
// at rel (fsx.OpenNoFollow). Through the root, whose open would follow one,
// it checks that the file it opened is the one lstat found, not a symlink.
func (d *Dir) openNoFollow(rel string) (*os.File, error) {
	f, err := fsx.OpenNoFollow(d.path(rel))
	if !tooLong(err) {
		return f, err
	}
	return inRoot(d, rel, func(r *os.Root, name string) (*os.File, error) {
		before, err := r.Lstat(name)
		if err != nil {
			return nil, err
		}
		if before.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: rel, Err: syscall.ELOOP}
		}
		f, err := r.Open(name)
		if err != nil {
			return nil, err
		}
		if after, err := f.Stat(); err != nil || !os.SameFile(before, after) {
			f.Close()
			if err == nil {
				err = &fs.PathError{Op: "open", Path: rel, Err: syscall.ELOOP} // replaced meanwhile
			}
			return nil, err
		}
		return f, nil
	})
}

// syncPath fsyncs the regular file or directory at rel ("" is the root);
// anything else (a symlink, a FIFO the user put there) is left alone: it
// holds no content of the cache, and opening a FIFO would block.
func (d *Dir) syncPath(rel string) error {
	fi, err := d.lstat(rel)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() || fi.IsDir() && !dirSync {
		return nil
	}
	f, err := os.Open(d.path(rel))
	if tooLong(err) {
		f, err = inRoot(d, rel, (*os.Root).Open)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// syncDir fsyncs the directory at rel ("" is the root), opened without
// following a symlink. Something that is no longer a directory holds nothing
// of the cache to sync.
func (d *Dir) syncDir(rel string) error {
	err := fsx.SyncDirNoFollow(d.path(rel))
	if tooLong(err) {
		fi, lerr := d.lstat(rel)
		switch {
		case lerr != nil:
			err = lerr
		case !fi.IsDir():
			return nil
		default:
			err = d.syncPath(rel)
		}
	}
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return nil
	}
	return err
}

// walk is filepath.WalkDir of rel ("" is the root) with absolute paths; below
// a directory whose path the system refuses as too long (and from rel, if its
// own is), it goes on through the cache root, calling fn with the same
// absolute paths, built as strings.
func (d *Dir) walk(rel string, fn fs.WalkDirFunc) error {
	return filepath.WalkDir(d.path(rel), func(p string, e fs.DirEntry, err error) error {
		if err == nil || !tooLong(err) || e != nil && !e.IsDir() {
			return fn(p, e, err)
		}
		// e == nil: the walk's start itself could not be read; else a
		// directory fn entered whose entries could not be read.
		sub := d.relOf(p)
		werr := d.walkInRoot(sub, e == nil, fn)
		if e == nil || werr != nil {
			return werr
		}
		return filepath.SkipDir
	})
}

// walkInRoot walks sub through the cache root (fs.WalkDir of its FS: each
// directory opened relative to its parents, each entry's info read with
// lstatat), calling fn with absolute paths; sub itself only when self.
func (d *Dir) walkInRoot(sub string, self bool, fn fs.WalkDirFunc) error {
	r, err := d.osRoot()
	if err != nil {
		return fn(d.path(sub), nil, err)
	}
	start := sub
	if start == "" {
		start = "."
	}
	if self {
		// As filepath.WalkDir: a start that is a symlink is reported, not
		// followed (fs.WalkDir would follow it).
		fi, err := r.Lstat(filepath.FromSlash(start))
		if err != nil {
			return fn(d.path(sub), nil, err)
		}
		if !fi.IsDir() {
			return fn(d.path(sub), fs.FileInfoToDirEntry(fi), nil)
		}
	}
	return fs.WalkDir(r.FS(), start, func(p string, e fs.DirEntry, err error) error {
		if p == start && err == nil && !self {
			return nil
		}
		if p == "." {
			return fn(d.root, e, err)
		}
		return fn(d.abs(p), e, err)
	})
}

// relOf is the slash-separated path of p (absolute, at or under the root)
// relative to the root.
func (d *Dir) relOf(p string) string {
	if p == d.root {
		return ""
	}
	return filepath.ToSlash(strings.TrimPrefix(p, d.root+string(filepath.Separator)))
}

// Files returns the paths (slash-separated, relative to the root) of
// everything at or under rel that is not a directory, without following
// symlinks: a file at rel is itself; an absent rel, nothing.
func (d *Dir) Files(rel string) ([]string, error) {
	if err := ledger.ValidatePath(rel); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	var files []string
	err := d.walk(rel, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == d.abs(rel) {
				return nil
			}
			return err
		}
		if !e.IsDir() {
			files = append(files, d.relOf(p))
		}
		return nil
	})
	return files, err
}

// RemoveDir removes the directory at rel if it is empty.
func (d *Dir) RemoveDir(rel string) error {
	if err := ledger.ValidatePath(rel); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafePath, err)
	}
	fi, err := d.lstat(rel)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("remove directory %s: %w", rel, ErrNotDir)
	}
	return d.removeName(rel)
}

// Move renames the file at from to to, both slash-separated and relative to
// the root, either a cache path or one inside the state directory (where a
// host keeps files aside: conflicts, a rebuild's kept files), making the
// directories to needs (mode 0700 in the state directory, else 0755). An
// absent from is fs.ErrNotExist.
func (d *Dir) Move(from, to string) error {
	for _, p := range []string{from, to} {
		if err := checkMovePath(p); err != nil {
			return fmt.Errorf("move %s to %s: %w", from, to, err)
		}
	}
	perm := fs.FileMode(0o755)
	if strings.HasPrefix(to, ledger.StateDir+"/") {
		perm = 0o700
	}
	if i := strings.LastIndexByte(to, '/'); i > 0 {
		if err := d.mkdirAll(to[:i], perm); err != nil {
			return fmt.Errorf("move %s to %s: %w", from, to, err)
		}
	}
	if err := d.rename(from, to); err != nil {
		return fmt.Errorf("move %s to %s: %w", from, to, err)
	}
	return nil
}

// checkMovePath checks a path Move takes: a valid cache path, or a path
// inside the state directory made of valid segments (a cache path under a
// directory of its own, which may make it longer than a cache path).
func checkMovePath(p string) error {
	inState, ok := strings.CutPrefix(p, ledger.StateDir+"/")
	if !ok {
		if err := ledger.ValidatePath(p); err != nil {
			return fmt.Errorf("%w: %w", ErrUnsafePath, err)
		}
		return nil
	}
	for seg := range strings.SplitSeq(inState, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.IndexByte(seg, '\\') >= 0 || len(seg) > ledger.MaxNameLen {
			return fmt.Errorf("path %q: bad segment %q: %w", p, seg, ErrUnsafePath)
		}
	}
	return nil
}

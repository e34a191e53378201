package fileblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// tmpPrefix begins the names of the temporary files puts write before renaming.
const tmpPrefix = ".syncledger-tmp-"

// Config configures a Store.
type Config struct {
	// Dir is the root directory. It is created (with its parents) if missing.
	Dir string
}

// Store is the driver.Bucket on a directory. It is safe for concurrent use, also
// by several processes sharing the directory.
type Store struct {
	dir string
}

var _ driver.Bucket = (*Store)(nil)

// New returns the Store rooted at cfg.Dir.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("new file store: Config.Dir is empty: %w", ledger.ErrInvalid)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("new file store %q: %w", cfg.Dir, err)
	}
	if err := mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("new file store: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("new file store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("new file store: %q is not a directory: %w", dir, ledger.ErrInvalid)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's absolute root directory.
func (s *Store) Dir() string { return s.dir }

// errReserved is the error of a key the store keeps for its temporary files.
var errReserved = fmt.Errorf("a segment begins with the reserved %q", tmpPrefix)

// path is key's path below the root; a key with a segment the store keeps for
// its temporary files has none (errReserved).
func (s *Store) path(key string) (string, error) {
	if strings.Contains(key, tmpPrefix) {
		for seg := range strings.SplitSeq(key, "/") {
			if strings.HasPrefix(seg, tmpPrefix) {
				return "", errReserved
			}
		}
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// notFound reports whether err means the path does not exist, including the case
// where one of its parents is a file.
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// errAbsent is the error of a key that names no object (a missing path, a
// directory, a key below a file): most of a commit's questions (new content),
// so one value, not one a question.
var errAbsent = fs.ErrNotExist

// errNoRoot is the error of a store whose root directory is gone (a disk
// unmounted, a directory removed): the store does not make it again, as a
// put into a mount point's empty directory would store what the disk should.
var errNoRoot = errors.New("the store's root directory does not exist")

// absent is the answer for a path that does not exist: errAbsent, or
// errNoRoot when the root itself is gone.
func (s *Store) absent() error {
	if _, err := os.Stat(s.dir); notFound(err) {
		return errNoRoot
	}
	return errAbsent
}

// ErrorCode implements driver.Bucket.
func (s *Store) ErrorCode(err error) driver.ErrorCode {
	switch {
	case errors.Is(err, errNoRoot):
		return driver.NoBucket
	case notFound(err):
		return driver.NotFound
	case errors.Is(err, fs.ErrPermission):
		return driver.PermissionDenied
	case errors.Is(err, errReserved), errors.Is(err, errFlushed):
		return driver.Invalid
	}
	return driver.Unknown
}

// PreferPut implements driver.Bucket: asking costs less than writing.
func (s *Store) PreferPut(int64) bool { return false }

// Close implements driver.Bucket: the store holds nothing.
func (s *Store) Close() error { return nil }

// Put implements driver.Bucket.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	dir, err := s.write(ctx, key, r, size)
	if err != nil {
		return err
	}
	return fsx.SyncDir(dir)
}

// write stores the object under its key, its content fsynced before the
// rename (a name never points at content a power cut could lose), and returns
// the directory whose fsync makes the name durable.
func (s *Store) write(ctx context.Context, key string, r io.Reader, size int64) (dir string, err error) {
	path, err := s.path(key)
	if err != nil {
		return "", err
	}
	dir = filepath.Dir(path)
	// Most puts go to a directory that exists (a blob store has 256): try
	// first, create the directories only when it is missing.
	f, err := fsx.CreateTemp(dir, tmpPrefix)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.absent(); err == errNoRoot {
			return "", err
		}
		if err := mkdirAll(dir); err != nil {
			return "", err
		}
		f, err = fsx.CreateTemp(dir, tmpPrefix)
	}
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := ledger.Copy(f, r); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := fsx.Rename(f.Name(), path); err != nil {
		return "", err
	}
	return dir, nil
}

// mkdirAll creates dir and its missing parents, fsyncing each new directory's
// parent so the new entry survives a power cut (the store's root included).
func mkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return fsx.SyncDir(parent)
}

// Get implements driver.Bucket. The returned reader is the open file.
func (s *Store) Get(_ context.Context, key string) (io.ReadCloser, error) {
	path, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		if notFound(err) {
			return nil, s.absent()
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, errAbsent
	}
	return f, nil
}

// Stat implements driver.Bucket.
func (s *Store) Stat(_ context.Context, key string) (driver.ObjectInfo, error) {
	path, err := s.path(key)
	if err != nil {
		return driver.ObjectInfo{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		if notFound(err) {
			return driver.ObjectInfo{}, s.absent()
		}
		return driver.ObjectInfo{}, err
	}
	if !fi.Mode().IsRegular() {
		return driver.ObjectInfo{}, errAbsent
	}
	return driver.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete implements driver.Bucket. A key naming a directory (a prefix of
// other keys) is not an object: deleting it does nothing.
func (s *Store) Delete(_ context.Context, key string) error {
	path, err := s.path(key)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		if notFound(err) {
			if err := s.absent(); err == errNoRoot {
				return err
			}
			return nil
		}
		return err
	}
	if fi.IsDir() {
		return nil
	}
	if err := os.Remove(path); err != nil {
		if notFound(err) {
			return nil
		}
		return err
	}
	return fsx.SyncDir(filepath.Dir(path))
}

// List implements driver.Bucket. It walks only the directory named by the
// prefix up to its last "/", in key order. fn's error is returned as is.
func (s *Store) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	if err := s.absent(); err == errNoRoot {
		return err
	}
	base := prefix[:strings.LastIndexByte(prefix, '/')+1]
	return s.walk(ctx, base, prefix, fn)
}

// walk lists the directory relDir ("" or ending in "/"). Sorting a directory's
// entries by name, with "/" appended to directory names, and descending into each
// directory at its place yields the keys in lexical order: all keys below directory
// "a" begin with "a/" and so sort together, exactly where "a/" sorts among its
// siblings.
func (s *Store) walk(ctx context.Context, relDir, prefix string, fn func(driver.ObjectInfo) error) error {
	entries, err := os.ReadDir(filepath.Join(s.dir, filepath.FromSlash(relDir)))
	if err != nil {
		if notFound(err) {
			return nil // nothing stored below relDir, or relDir is an object
		}
		return err
	}
	sortName := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(sortName(a), sortName(b)) })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		key := relDir + e.Name()
		switch {
		case e.IsDir():
			sub := key + "/"
			if !strings.HasPrefix(sub, prefix) && !strings.HasPrefix(prefix, sub) {
				continue
			}
			if err := s.walk(ctx, sub, prefix, fn); err != nil {
				return err
			}
		case e.Type().IsRegular():
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			fi, err := e.Info()
			if err != nil {
				if notFound(err) {
					continue // deleted since ReadDir
				}
				return err
			}
			if err := fn(driver.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

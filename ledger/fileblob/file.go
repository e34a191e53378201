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
)

// tmpPrefix begins the names of the temporary files puts write before renaming.
const tmpPrefix = ".syncledger-tmp-"

// Config configures a Store.
type Config struct {
	// Dir is the root directory. It is created (with its parents) if missing.
	Dir string
}

// Store is a ledger.ObjectStore on a directory. It is safe for concurrent use, also
// by several processes sharing the directory.
type Store struct {
	dir string
}

var _ ledger.ObjectStore = (*Store)(nil)

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

func checkKey(key string) error {
	if err := ledger.ValidateKey(key); err != nil {
		return err
	}
	if !strings.Contains(key, tmpPrefix) {
		return nil
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tmpPrefix) {
			return fmt.Errorf("object key %q: segment begins with reserved %q: %w", key, tmpPrefix, ledger.ErrInvalid)
		}
	}
	return nil
}

func (s *Store) path(key string) string {
	return filepath.Join(s.dir, filepath.FromSlash(key))
}

// notFound reports whether err means the path does not exist, including the case
// where one of its parents is a file.
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// PutObject implements ledger.ObjectStore.
func (s *Store) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	dir, err := s.write(ctx, key, r, size)
	if err == nil {
		err = fsx.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	return nil
}

// write stores the object under its key, its content fsynced before the
// rename (a name never points at content a power cut could lose), and returns
// the directory whose fsync makes the name durable.
func (s *Store) write(ctx context.Context, key string, r io.Reader, size int64) (dir string, err error) {
	path := s.path(key)
	dir = filepath.Dir(path)
	// Most puts go to a directory that exists (a blob store has 256): try
	// first, create the directories only when it is missing.
	f, err := fsx.CreateTemp(dir, tmpPrefix)
	if errors.Is(err, fs.ErrNotExist) {
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
	pr := ledger.NewPutReader(ctx, r, size)
	if _, err := ledger.Copy(f, pr); err != nil {
		if rerr := pr.Err(); rerr != nil {
			return "", rerr
		}
		return "", err
	}
	if err := pr.Done(); err != nil {
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

// GetObject implements ledger.ObjectStore. The returned reader is the open file.
func (s *Store) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("get object %q: %w", key, ledger.ErrNotFound)
		}
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("get object %q: %w", key, ledger.ErrNotFound)
	}
	return f, nil
}

// StatObject implements ledger.ObjectStore.
func (s *Store) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	fi, err := os.Stat(s.path(key))
	if err != nil {
		if notFound(err) {
			return ledger.ObjectInfo{}, absent(key)
		}
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return ledger.ObjectInfo{}, absent(key)
	}
	return ledger.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// absentError is StatObject's answer for a key that names no object: most
// of a commit's questions (new content), so its message is formatted only
// when read.
type absentError struct{ key string }

func absent(key string) error { return &absentError{key} }

func (e *absentError) Error() string {
	return fmt.Sprintf("stat object %q: %v", e.key, ledger.ErrNotFound)
}

func (e *absentError) Unwrap() error { return ledger.ErrNotFound }

// DeleteObject implements ledger.ObjectStore. A key naming a directory (a prefix of
// other keys) is not an object: deleting it does nothing.
func (s *Store) DeleteObject(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	path := s.path(key)
	fi, err := os.Lstat(path)
	if err != nil {
		if notFound(err) {
			return nil
		}
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	if fi.IsDir() {
		return nil
	}
	if err := os.Remove(path); err != nil {
		if notFound(err) {
			return nil
		}
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	if err := fsx.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	return nil
}

// ListObjects implements ledger.ObjectStore. It walks only the directory named by
// the prefix up to its last "/", in key order. fn's error is returned as is.
func (s *Store) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	if err := ledger.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	base := prefix[:strings.LastIndexByte(prefix, '/')+1]
	return s.walk(ctx, base, prefix, fn)
}

// walk lists the directory relDir ("" or ending in "/"). Sorting a directory's
// entries by name, with "/" appended to directory names, and descending into each
// directory at its place yields the keys in lexical order: all keys below directory
// "a" begin with "a/" and so sort together, exactly where "a/" sorts among its
// siblings.
func (s *Store) walk(ctx context.Context, relDir, prefix string, fn func(ledger.ObjectInfo) error) error {
	entries, err := os.ReadDir(filepath.Join(s.dir, filepath.FromSlash(relDir)))
	if err != nil {
		if notFound(err) {
			return nil // nothing stored below relDir, or relDir is an object
		}
		return fmt.Errorf("list objects %q: %w", prefix, err)
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
				return fmt.Errorf("list objects %q: %w", prefix, err)
			}
			fi, err := e.Info()
			if err != nil {
				if notFound(err) {
					continue // deleted since ReadDir
				}
				return fmt.Errorf("list objects %q: %w", prefix, err)
			}
			if err := fn(ledger.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

package statedb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/syncledger/syncledger/ledger"
)

// A damaged database (a bad page: a disk error, a bit flip, a copy cut short)
// is an error, never a crash. bbolt trusts its pages: on a damaged one it
// panics (an assertion, an index out of range) or reads through a page id
// past its memory map and faults (SIGSEGV, SIGBUS). Every access to the
// database therefore runs with faults made panics (debug.SetPanicOnFault) and
// a deferred DB.damaged that recovers a panic as a *CorruptError. That is safe to
// recover from: bbolt maps the file read-only, so a wild read cannot have
// written anywhere, and its writes go from pages it allocated on the heap;
// a write transaction that panicked is rolled back (bolt.DB.Update). Once a
// DB has met damage every later call fails with the same error, and Close
// does not wait on bbolt's locks (a rollback that panicked too may hold them).
//
// The way out is a rebuild (package host): SetAside moves the damaged file
// out of the way, a new database starts with Recovering set, and the rebuild
// restores the state from the ledger, keeping every file of the cache that
// differs from it (in the directory SetRecovering records).

// ErrCorrupt: the state database is damaged (see CorruptError).
var ErrCorrupt = errors.New("the cache's state database is damaged")

// CorruptError is a damaged state database: bbolt's panic or fault, a failed
// consistency check, or a value that does not decode.
type CorruptError struct {
	Path   string // the database file
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("state database %s is damaged (%s): a rebuild starts it over from the ledger and the cache, "+
		"keeping every file that differs from the ledger under %s/conflicts/", e.Path, e.Reason, ledger.StateDir)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// damaged is deferred by every access to the database, after
// debug.SetPanicOnFault(true) (whose old setting it restores): it recovers a
// panic — a fault included — as a *CorruptError in *err, recorded in d.bad
// (every later call fails with it), after ending the reads' transaction when
// rollback is set. (A method deferred directly, not a closure: the reads run it
// at every lookup.)
func (d *DB) damaged(old bool, err *error, rollback bool) {
	r := recover()
	debug.SetPanicOnFault(old)
	if r == nil {
		return
	}
	if rollback {
		func() {
			defer func() { _ = recover() }() // a rollback over damaged pages may panic again
			d.endRead()
		}()
	}
	d.bad = &CorruptError{Path: d.db.Path(), Reason: firstLine(fmt.Sprint(r))}
	*err = d.bad
}

// openBolt opens the bbolt database at path with faults made panics: a
// damaged file is a *CorruptError, and the file bbolt opened (and locked) is
// closed even when bbolt panicked.
func openBolt(path string, wait time.Duration) (db *bolt.DB, err error) {
	var file *os.File
	opts := &bolt.Options{Timeout: wait, OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}}
	defer func(old bool) {
		r := recover()
		debug.SetPanicOnFault(old)
		if r != nil {
			if file != nil {
				file.Close() // bbolt's lock goes with it
			}
			db, err = nil, &CorruptError{Path: path, Reason: firstLine(fmt.Sprint(r))}
		}
	}(debug.SetPanicOnFault(true))
	db, err = bolt.Open(path, 0o600, opts)
	if err != nil && corruptOpen(err) {
		return nil, &CorruptError{Path: path, Reason: err.Error()}
	}
	if err != nil && !errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	return db, err
}

// firstLine is a panic's message up to its first line break.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// corruptOpen reports whether err from bolt.Open says the file is damaged
// (both meta pages invalid, a page size it cannot use).
func corruptOpen(err error) bool {
	return errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) ||
		errors.Is(err, bolterrors.ErrInvalidMapping)
}

// Check reads every row of the database (each decoded) and then runs
// bbolt's consistency check (every page reachable once, none both reachable
// and free, keys in order): an error is a *CorruptError. bbolt's check runs in
// a goroutine of its own, where a fault cannot be recovered, so the guarded
// read of every page comes first. It reads the whole file (bbolt's check
// alone took 0.11–0.36 s for an index of 100,000 files, 0.8–1.05 s for
// 1,000,000): a rebuild runs it, not every command.
func (d *DB) Check() error {
	_, err := d.Load()
	if err == nil {
		_, err = d.Journal()
	}
	if err == nil {
		err = d.ForEach(func(string, Entry) error { return nil })
	}
	if err == nil {
		err = d.view(func(tx *bolt.Tx) error {
			var first error
			for cerr := range tx.Check() { // drained: the check's goroutine reads the pages until it is done
				if first == nil {
					first = cerr
				}
			}
			return first
		})
	}
	var ce *CorruptError
	if err != nil && !errors.As(err, &ce) {
		err = &CorruptError{Path: d.db.Path(), Reason: err.Error()}
	}
	return err
}

// SetAside moves the damaged database at path out of the way, to
// path.damaged-<time>, and returns that name: the next Open starts a new one.
// It fails with ErrLocked while another process has the database open.
func SetAside(path string, now time.Time) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("set aside %s: %w", path, err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return "", fmt.Errorf("set aside %s: %w", path, err)
	}
	// The lock is on the file this process opened: make sure the path still
	// names it (another rebuild may have set it aside and started a new one).
	held, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("set aside %s: %w", path, err)
	}
	if cur, err := os.Lstat(path); err != nil || !os.SameFile(held, cur) {
		return "", fmt.Errorf("set aside %s: another process replaced it meanwhile: %w", path, ErrLocked)
	}
	aside := path + ".damaged-" + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("set aside %s: %w", path, err)
	}
	if err := syncDirs(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("set aside %s: %w", path, err)
	}
	return aside, nil
}

// SetRecovering records durably that this database was started over because
// the previous one was damaged, and where the rebuild keeps the files that
// differ from the ledger (a directory relative to the state directory):
// until ClearRecovering, the index is not the cache's, and only a rebuild may
// use it. It also sets Restoring (to seq 0): a sync finishes the rebuild.
func (d *DB) SetRecovering(aside string) error {
	return d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		m := tx.Bucket(bMeta)
		if err := m.Put(kRestoring, u64(0)); err != nil {
			return err
		}
		return m.Put(kRecovering, []byte(aside))
	})
}

// Recovering returns the directory SetRecovering recorded, or "" when the
// state is not being rebuilt after damage.
func (d *DB) Recovering() (aside string, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		aside = string(tx.Bucket(bMeta).Get(kRecovering))
		return nil
	})
	return aside, err
}

// ClearRecovering records that the rebuild after damage is done.
func (d *DB) ClearRecovering() error {
	return d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Delete(kRecovering)
	})
}

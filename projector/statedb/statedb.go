package statedb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

// SchemaVersion is the on-disk layout version of the database.
const SchemaVersion = 1

// ErrLocked: another process has the cache's database open (it holds the
// file's lock).
var ErrLocked = errors.New("cache is in use by another syncledger process")

var (
	bMeta  = []byte("meta")
	bMarks = []byte("marks")
	bIndex = []byte("index")
	// bJournal holds, while a Ready is being applied, what the apply puts at
	// each path, so that a file left by an interrupted apply is told apart from
	// a local change (see JournalEntry).
	bJournal = []byte("journal")

	kSchema = []byte("schema")
	kLedger = []byte("ledger")
	kName   = []byte("name")
	kHWM    = []byte("hwm")
	kLazy   = []byte("lazy")
	kGen    = []byte("gen")
	// kRestoring: a rebuild's restore (a Ready that resets the state) is under
	// way, to the snapshot at this seq; the transaction that installs the new
	// state (Tx.Reset) clears it.
	kRestoring = []byte("restoring")
	// kRecovering: the state was started over because the previous database
	// was damaged; the value is where the rebuild keeps the cache's files that
	// differ from the ledger (SetRecovering).
	kRecovering = []byte("recovering")
	// kJournal: the journal record of the Ready being applied (AddJournal).
	kJournal = []byte("journal-record")
)

// Mark is the projector's mark of a partition.
type Mark = projector.Mark

// State is the projector's durable state.
type State struct {
	Ledger string // ledger UUID; empty before the first sync
	Name   string // ledger name, for messages
	HWM    ledger.Seq
	Marks  map[string]Mark
}

// DB is an open state database.
//
// Its reads share one read transaction, begun by the first read after a
// write and ended by the next write (or Close): a read costs a lookup, not a
// transaction. A read's callback (ForEach, ForEachPrefix, Files, Marks) must
// not call the DB, nor may an Update's fn.
type DB struct {
	db  *bolt.DB
	mu  sync.Mutex // guards rtx and rb, held for each read and write
	rtx *bolt.Tx   // the reads' transaction; nil until the next read
	// rb caches rtx's buckets: a read transaction opens a bucket again at
	// every lookup (bbolt caches them for write transactions only).
	rb map[string]*bolt.Bucket
	// bad is the damage a call met (damage.go): every later call fails with it.
	bad error
}

// bucket returns the named bucket of the reads' transaction tx (inside view).
func (d *DB) bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	if b := d.rb[string(name)]; b != nil {
		return b
	}
	b := tx.Bucket(name)
	if d.rb == nil {
		d.rb = map[string]*bolt.Bucket{}
	}
	d.rb[string(name)] = b
	return b
}

// view runs fn in the reads' transaction, beginning it if none is open.
func (d *DB) view(fn func(*bolt.Tx) error) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bad != nil {
		return d.bad
	}
	defer d.damaged(debug.SetPanicOnFault(true), &err, true)
	if d.rtx == nil {
		tx, err := d.db.Begin(false)
		if err != nil {
			return err
		}
		d.rtx = tx
	}
	err = fn(d.rtx)
	if err != nil && errors.Is(err, ErrCorrupt) {
		// A row that does not decode: damage bbolt did not see.
		var ce *CorruptError
		if !errors.As(err, &ce) {
			err = &CorruptError{Path: d.db.Path(), Reason: err.Error()}
		}
		d.bad = err
	}
	return err
}

// update runs fn in a write transaction, after ending the reads' one: bbolt
// grows the file's mapping only while no transaction reads it, and the reads
// after the write must see it.
func (d *DB) update(fn func(*bolt.Tx) error) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bad != nil {
		return d.bad
	}
	defer d.damaged(debug.SetPanicOnFault(true), &err, false) // bolt's Update rolls back on a panic
	d.endRead()
	return d.db.Update(fn)
}

// endRead ends the reads' transaction; d.mu is held.
func (d *DB) endRead() {
	if d.rtx != nil {
		_ = d.rtx.Rollback() // a read transaction: nothing to lose
		d.rtx = nil
		clear(d.rb)
	}
}

// Open opens (creating) the database at path, waiting at most wait for another
// process's lock.
func Open(path string, wait time.Duration) (*DB, error) {
	return OpenContext(context.Background(), path, wait)
}

// lockPoll is how long one attempt at the lock waits before OpenContext looks
// at its context again.
const lockPoll = 100 * time.Millisecond

// OpenContext is Open that stops waiting for another process's lock when ctx
// ends (with ctx's error), as well as after wait.
func OpenContext(ctx context.Context, path string, wait time.Duration) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	_, serr := os.Lstat(path)
	created := errors.Is(serr, fs.ErrNotExist)
	db, err := openBoltContext(ctx, path, wait)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open state %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	d := &DB{db: db}
	// A state already set up needs no write transaction (which would fsync):
	// processes that take the cache per operation open it often.
	ready := false
	err = d.view(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bMeta, bMarks, bIndex, bJournal, bCommits} {
			if tx.Bucket(b) == nil {
				return nil
			}
		}
		var err error
		ready, err = checkSchema(tx.Bucket(bMeta))
		return err
	})
	if err == nil && !ready {
		err = d.update(setUp)
	}
	if err == nil && created {
		// bbolt fsyncs the file, not the directory entry that names it: without
		// this a power cut can lose the whole state.db (and its directory).
		err = syncDirs(filepath.Dir(path))
	}
	if err != nil {
		d.Close()
		var ce *CorruptError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	return d, nil
}

// setUp creates the buckets and records the schema version (or checks it).
func setUp(tx *bolt.Tx) error {
	for _, b := range [][]byte{bMeta, bMarks, bIndex, bJournal, bCommits} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bMeta)
	if present, err := checkSchema(meta); present || err != nil {
		return err
	}
	return meta.Put(kSchema, u64(SchemaVersion))
}

// checkSchema reports whether the schema version is recorded, and fails if it
// is not this build's.
func checkSchema(meta *bolt.Bucket) (present bool, err error) {
	v := meta.Get(kSchema)
	if v == nil {
		return false, nil
	}
	if s := binary.BigEndian.Uint64(v); s != SchemaVersion {
		return true, fmt.Errorf("schema version %d (this build reads %d): %w", s, SchemaVersion, ledger.ErrUnknownVersion)
	}
	return true, nil
}

// syncDirs fsyncs dir and its parent, which may have been created with it.
func syncDirs(dir string) error {
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := fsx.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database. A damaged one is closed without waiting on
// bbolt's locks, which a panicked rollback may hold: at worst its file stays
// open (and locked) until the process exits.
func (d *DB) Close() (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bad == nil {
		defer d.damaged(debug.SetPanicOnFault(true), &err, false)
		d.endRead()
		return d.db.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		d.endRead()
		_ = d.db.Close()
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	return nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func getU64(b *bolt.Bucket, k []byte) uint64 {
	if v := b.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// openBoltContext waits for the lock in attempts of at most lockPoll (bbolt
// polls flock within each), so a cancelled ctx stops the wait within lockPoll.
// A wait of 0 waits as long as ctx lasts (bbolt's Timeout 0).
func openBoltContext(ctx context.Context, path string, wait time.Duration) (*bolt.DB, error) {
	deadline := time.Now().Add(wait)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("open state %s: waiting for the lock: %w", path, context.Cause(ctx))
		}
		step := lockPoll
		if wait > 0 {
			if step = min(time.Until(deadline), lockPoll); step <= 0 {
				return nil, bolterrors.ErrTimeout
			}
		}
		db, err := openBolt(path, step)
		if !errors.Is(err, bolterrors.ErrTimeout) {
			return db, err
		}
	}
}

// Package statedb persists a host's projector state and the index of its cache in
// one bbolt database inside the cache (.syncledger/state.db).
//
// Everything the projector learns is written in one transaction per Ready: the
// index entries of the files written or deleted, the partition marks and the HWM.
// Files are made durable (fsynced, with their directories) before the
// transaction that records them commits, so the state is never ahead of the
// files, even after a power cut; a crash between the two leaves files the state
// does not yet claim, and the next sync re-applies them (rule 1 does not skip them
// because their marks were not persisted).
//
// The projector's core reads the state through the DB's projector.Storage
// methods (HardState, Mark, Marks, File, Under, Files), lookups in one read
// transaction that lasts until the next write: a row at a time, never the
// whole index for a step.
//
// bbolt holds an exclusive file lock while the database is open: a second process
// on the same cache gets ErrLocked instead of interleaving writes.
package statedb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

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
)

// Mark is the projector's mark of a partition.
type Mark = projector.Mark

// Entry is the index record of one cache file: what the ledger says (digest, size,
// mode, the seq that last wrote it) and what the cache had when it was written or
// last verified (mtime), plus the lazy flag (metadata applied, content not fetched).
type Entry struct {
	Digest ledger.Digest
	Size   int64
	Mode   uint32
	MTime  time.Time // local mtime after the write; zero when lazy
	Lazy   bool
	Seq    ledger.Seq
}

const entryLen = 32 + 8 + 4 + 8 + 1 + 8

func (e Entry) marshal() []byte {
	b := make([]byte, entryLen)
	copy(b, e.Digest[:])
	binary.BigEndian.PutUint64(b[32:], uint64(e.Size))
	binary.BigEndian.PutUint32(b[40:], e.Mode)
	var mt int64
	if !e.MTime.IsZero() {
		mt = e.MTime.UnixNano()
	}
	binary.BigEndian.PutUint64(b[44:], uint64(mt))
	if e.Lazy {
		b[52] = 1
	}
	binary.BigEndian.PutUint64(b[53:], uint64(e.Seq))
	return b
}

func unmarshalEntry(b []byte) (Entry, error) {
	if len(b) != entryLen {
		return Entry{}, fmt.Errorf("index entry of %d bytes, want %d: %w (%w)", len(b), entryLen, ErrCorrupt, ledger.ErrInvalid)
	}
	var e Entry
	copy(e.Digest[:], b)
	e.Size = int64(binary.BigEndian.Uint64(b[32:]))
	e.Mode = binary.BigEndian.Uint32(b[40:])
	if mt := int64(binary.BigEndian.Uint64(b[44:])); mt != 0 {
		e.MTime = time.Unix(0, mt)
	}
	e.Lazy = b[52] == 1
	e.Seq = ledger.Seq(binary.BigEndian.Uint64(b[53:]))
	return e, nil
}

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
	db   *bolt.DB
	rows atomic.Uint64 // index entries and marks decoded (RowsRead)
	mu   sync.Mutex    // guards rtx and rb, held for each read and write
	rtx  *bolt.Tx      // the reads' transaction; nil until the next read
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

// RowsRead returns how many index entries and marks the reads of d have
// decoded since Open: what tests check to see that an operation's reads
// follow the change, not the size of the index.
func (d *DB) RowsRead() uint64 { return d.rows.Load() }

// Open opens (creating) the database at path, waiting at most wait for another
// process's lock.
func Open(path string, wait time.Duration) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	_, serr := os.Lstat(path)
	created := errors.Is(serr, fs.ErrNotExist)
	db, err := openBolt(path, wait)
	if errors.Is(err, bolt.ErrTimeout) {
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
		for _, b := range [][]byte{bMeta, bMarks, bIndex, bJournal} {
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
	for _, b := range [][]byte{bMeta, bMarks, bIndex, bJournal} {
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
// Not on Windows: a directory handle cannot be flushed, and NTFS journals the
// metadata (docs/design.md §9).
func syncDirs(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		f, err := os.Open(d)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("sync directory %s: %w", d, err)
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

// HWM reads only the HWM and ledger UUID: the fast path's one local read,
// independent of the number of entries.
func (d *DB) HWM() (uuid string, hwm ledger.Seq, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		uuid, hwm = string(m.Get(kLedger)), ledger.Seq(getU64(m, kHWM))
		return nil
	})
	return uuid, hwm, err
}

// LazyCount returns how many index entries are lazy (metadata only).
func (d *DB) LazyCount() (n uint64, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		n = getU64(tx.Bucket(bMeta), kLazy)
		return nil
	})
	return n, err
}

// Mark reads one partition's mark (zero if none).
func (d *DB) Mark(partition string) (m Mark, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		v := d.bucket(tx, bMarks).Get([]byte(partition))
		if v != nil {
			d.rows.Add(1)
		}
		m, err = decodeMark(v)
		return err
	})
	return m, err
}

func decodeMark(v []byte) (Mark, error) {
	if v == nil {
		return Mark{}, nil
	}
	if len(v) != 16 {
		return Mark{}, fmt.Errorf("mark of %d bytes: %w (%w)", len(v), ErrCorrupt, ledger.ErrInvalid)
	}
	return Mark{ModelSeq: binary.BigEndian.Uint64(v), Seq: ledger.Seq(binary.BigEndian.Uint64(v[8:]))}, nil
}

// Load reads the whole state (not the index).
func (d *DB) Load() (State, error) {
	st := State{Marks: map[string]Mark{}}
	err := d.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		st.Ledger, st.Name, st.HWM = string(m.Get(kLedger)), string(m.Get(kName)), ledger.Seq(getU64(m, kHWM))
		return tx.Bucket(bMarks).ForEach(func(k, v []byte) error {
			mk, err := decodeMark(v)
			if err != nil {
				return fmt.Errorf("partition %q: %w", k, err)
			}
			d.rows.Add(1)
			st.Marks[string(k)] = mk
			return nil
		})
	})
	if err != nil {
		return State{}, fmt.Errorf("load state: %w", err)
	}
	return st, nil
}

// The projector's Storage (projector.Storage): the core reads the marks and
// index rows it needs, a lookup each in the reads' transaction, never the
// whole index for a step.

var _ projector.Storage = (*DB)(nil)

// HardState returns the ledger's UUID and the HWM (projector.Storage).
func (d *DB) HardState() (string, ledger.Seq, error) { return d.HWM() }

// Marks calls fn for every partition's mark, in partition order, until fn
// returns false (projector.Storage).
func (d *DB) Marks(fn func(partition string, m Mark) bool) error {
	return d.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bMarks).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			mk, err := decodeMark(v)
			if err != nil {
				return fmt.Errorf("partition %q: %w", k, err)
			}
			d.rows.Add(1)
			if !fn(string(k), mk) {
				return nil
			}
		}
		return nil
	})
}

// File returns path's index row as the projector sees it (projector.Storage).
func (d *DB) File(path string) (projector.File, bool, error) {
	e, ok, err := d.Get(path)
	return e.File(), ok, err
}

// File is the projector's view of the entry.
func (e Entry) File() projector.File {
	return projector.File{SHA256: e.Digest, Size: e.Size, Mode: e.Mode, Lazy: e.Lazy}
}

// Under reports whether any index entry lies under dir, a path starting with
// dir + "/" (projector.Storage): one seek.
func (d *DB) Under(dir string) (ok bool, err error) {
	pre := []byte(dir + "/")
	err = d.view(func(tx *bolt.Tx) error {
		k, _ := d.bucket(tx, bIndex).Cursor().Seek(pre)
		ok = k != nil && bytes.HasPrefix(k, pre)
		return nil
	})
	return ok, err
}

// Files calls fn for every index row whose path starts with prefix, in path
// order, until fn returns false (projector.Storage).
func (d *DB) Files(prefix string, fn func(path string, f projector.File) bool) error {
	return d.ForEachPrefix(prefix, func(p string, e Entry) (bool, error) { return fn(p, e.File()), nil })
}

// ForEachPrefix calls fn for every index entry whose path starts with prefix,
// in path order, until fn returns false or an error. fn must not call the
// database.
func (d *DB) ForEachPrefix(prefix string, fn func(path string, e Entry) (bool, error)) error {
	pre := []byte(prefix)
	return d.view(func(tx *bolt.Tx) error {
		c := d.bucket(tx, bIndex).Cursor()
		for k, v := c.Seek(pre); k != nil && bytes.HasPrefix(k, pre); k, v = c.Next() {
			e, err := unmarshalEntry(v)
			if err != nil {
				return fmt.Errorf("index %q: %w", k, err)
			}
			d.rows.Add(1)
			if more, err := fn(string(k), e); err != nil || !more {
				return err
			}
		}
		return nil
	})
}

// Len returns the number of index entries.
func (d *DB) Len() (n int, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bIndex).Stats().KeyN
		return nil
	})
	return n, err
}

// Get returns the index entry of path.
func (d *DB) Get(path string) (e Entry, ok bool, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		v := d.bucket(tx, bIndex).Get([]byte(path))
		if v == nil {
			return nil
		}
		d.rows.Add(1)
		ok = true
		e, err = unmarshalEntry(v)
		return err
	})
	return e, ok, err
}

// ForEach calls fn for every index entry in path order.
func (d *DB) ForEach(fn func(path string, e Entry) error) error {
	return d.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bIndex).ForEach(func(k, v []byte) error {
			e, err := unmarshalEntry(v)
			if err != nil {
				return fmt.Errorf("index %q: %w", k, err)
			}
			d.rows.Add(1)
			return fn(string(k), e)
		})
	})
}

// Tx is a write transaction.
type Tx struct{ tx *bolt.Tx }

// Update runs fn in one durable transaction (fsynced on commit). Every write
// transaction advances the generation (see Gen).
func (d *DB) Update(fn func(*Tx) error) error {
	return d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		return fn(&Tx{tx})
	})
}

// Gen returns the state's generation: a counter every write transaction
// advances. A process that keeps the state in memory between holds of the
// cache (watch) compares it to tell whether another process changed the state
// meanwhile.
func (d *DB) Gen() (gen uint64, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		gen = getU64(tx.Bucket(bMeta), kGen)
		return nil
	})
	return gen, err
}

func bumpGen(tx *bolt.Tx) error {
	m := tx.Bucket(bMeta)
	return m.Put(kGen, u64(getU64(m, kGen)+1))
}

// SetLedger records the ledger's UUID and name.
func (t *Tx) SetLedger(uuid, name string) error {
	m := t.tx.Bucket(bMeta)
	if err := m.Put(kLedger, []byte(uuid)); err != nil {
		return err
	}
	return m.Put(kName, []byte(name))
}

// SetHWM records the HWM. It refuses to decrease it (invariant I3).
func (t *Tx) SetHWM(h ledger.Seq) error {
	m := t.tx.Bucket(bMeta)
	if cur := ledger.Seq(getU64(m, kHWM)); h < cur {
		return fmt.Errorf("set hwm %d below %d: broken invariant", h, cur)
	}
	return m.Put(kHWM, u64(uint64(h)))
}

// PutMark records a partition's mark. It refuses to move it backwards (I3).
func (t *Tx) PutMark(partition string, mk Mark) error {
	b := t.tx.Bucket(bMarks)
	cur, err := decodeMark(b.Get([]byte(partition)))
	if err != nil {
		return err
	}
	if mk.Seq < cur.Seq || mk.ModelSeq < cur.ModelSeq {
		return fmt.Errorf("set mark of %q to %+v below %+v: broken invariant", partition, mk, cur)
	}
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, mk.ModelSeq)
	binary.BigEndian.PutUint64(v[8:], uint64(mk.Seq))
	return b.Put([]byte(partition), v)
}

// Put records path's index entry.
func (t *Tx) Put(path string, e Entry) error {
	if err := t.countLazy(path, e.Lazy); err != nil {
		return err
	}
	return t.tx.Bucket(bIndex).Put([]byte(path), e.marshal())
}

// Delete removes path's index entry.
func (t *Tx) Delete(path string) error {
	if err := t.countLazy(path, false); err != nil {
		return err
	}
	return t.tx.Bucket(bIndex).Delete([]byte(path))
}

// countLazy keeps the lazy counter equal to the number of lazy entries.
func (t *Tx) countLazy(path string, lazy bool) error {
	was := false
	if v := t.tx.Bucket(bIndex).Get([]byte(path)); v != nil {
		old, err := unmarshalEntry(v)
		if err != nil {
			return err
		}
		was = old.Lazy
	}
	if was == lazy {
		return nil
	}
	m := t.tx.Bucket(bMeta)
	n := getU64(m, kLazy)
	if lazy {
		n++
	} else {
		n--
	}
	return m.Put(kLazy, u64(n))
}

// Reset empties marks, index and HWM (a full rebuild starts a new state).
func (t *Tx) Reset() error {
	for _, b := range [][]byte{bMarks, bIndex} { // not the journal: see JournalEntry
		if err := t.tx.DeleteBucket(b); err != nil {
			return err
		}
		if _, err := t.tx.CreateBucket(b); err != nil {
			return err
		}
	}
	m := t.tx.Bucket(bMeta)
	for _, k := range [][]byte{kHWM, kLazy, kRestoring} {
		if err := m.Delete(k); err != nil {
			return err
		}
	}
	return m.Delete(kLedger)
}

// JournalEntry is what applies in progress may have left at a path: content with
// one of Digests, or nothing (Removed). The shell journals a Ready's file
// operations durably before it performs them and clears them in the transaction
// that persists the Ready. A file that matches its journal entry was left by an
// apply interrupted before its state was persisted (a crash, a failed download):
// it is not a local change, and the next sync, which applies the same events
// again, may replace it. Entries accumulate until cleared: an apply interrupted
// again may leave either its own content or an earlier one's.
type JournalEntry struct {
	Digests []ledger.Digest
	Removed bool
}

// Matches reports whether a file with digest d (exists false: no file) is one
// the journalled applies may have left.
func (e JournalEntry) Matches(exists bool, d ledger.Digest) bool {
	if !exists {
		return e.Removed
	}
	return slices.Contains(e.Digests, d)
}

func (e JournalEntry) marshal() []byte {
	v := make([]byte, 1, 1+32*len(e.Digests))
	if e.Removed {
		v[0] = 1
	}
	for _, d := range e.Digests {
		v = append(v, d[:]...)
	}
	return v
}

func unmarshalJournal(v []byte) (JournalEntry, error) {
	if len(v) == 0 || (len(v)-1)%32 != 0 {
		return JournalEntry{}, fmt.Errorf("journal entry of %d bytes: %w (%w)", len(v), ErrCorrupt, ledger.ErrInvalid)
	}
	e := JournalEntry{Removed: v[0] == 1}
	for i := 1; i < len(v); i += 32 {
		e.Digests = append(e.Digests, ledger.Digest(v[i:i+32]))
	}
	return e, nil
}

// AddJournal merges entries into the journal durably (one transaction) and
// returns the merged entries of those paths.
func (d *DB) AddJournal(entries map[string]JournalEntry) (map[string]JournalEntry, error) {
	merged := make(map[string]JournalEntry, len(entries))
	err := d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		b := tx.Bucket(bJournal)
		// In key order: bbolt inserts a key by shifting its node's later keys,
		// so a large batch in random (map) order costs quadratic copying.
		for _, p := range slices.Sorted(maps.Keys(entries)) {
			e := entries[p]
			if v := b.Get([]byte(p)); v != nil {
				old, err := unmarshalJournal(v)
				if err != nil {
					return fmt.Errorf("journal %q: %w", p, err)
				}
				e.Removed = e.Removed || old.Removed
				for _, d := range old.Digests {
					if !slices.Contains(e.Digests, d) {
						e.Digests = append(e.Digests, d)
					}
				}
			}
			if err := b.Put([]byte(p), e.marshal()); err != nil {
				return err
			}
			merged[p] = e
		}
		return nil
	})
	return merged, err
}

// SetRestoring records durably that a rebuild's restore to the snapshot at
// seq starts: until the transaction that installs its state (Tx.Reset), the
// cache may hold the snapshot's files under the old state, which no sync
// replaces (the events that wrote the old state's files are behind the HWM),
// so the next sync must finish the rebuild first (Restoring).
func (d *DB) SetRestoring(seq ledger.Seq) error {
	return d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(kRestoring, u64(uint64(seq)))
	})
}

// Restoring reports whether a rebuild's restore was interrupted, and to which
// snapshot seq (see SetRestoring).
func (d *DB) Restoring() (seq ledger.Seq, ok bool, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bMeta).Get(kRestoring)
		if ok = len(v) == 8; ok {
			seq = ledger.Seq(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return seq, ok, err
}

// Journal returns the journal's entries.
func (d *DB) Journal() (map[string]JournalEntry, error) {
	out := map[string]JournalEntry{}
	err := d.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bJournal).ForEach(func(k, v []byte) error {
			e, err := unmarshalJournal(v)
			if err != nil {
				return fmt.Errorf("journal %q: %w", k, err)
			}
			out[string(k)] = e
			return nil
		})
	})
	return out, err
}

// ClearJournal removes path's journal entry.
func (t *Tx) ClearJournal(path string) error { return t.tx.Bucket(bJournal).Delete([]byte(path)) }

package statedb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

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
		m, err = decodeMark(d.bucket(tx, bMarks).Get([]byte(partition)))
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
			if more, err := fn(string(k), e); err != nil || !more {
				return err
			}
		}
		return nil
	})
}

// ForEachEntered is ForEachPrefix over the directories enter accepts: a row
// whose path lies in a directory below prefix that enter refuses (each
// directory of the path is asked, top-down, as a walk would: slash-separated,
// no trailing slash) is not read, nor is any other row of that directory's
// subtree: the cursor seeks past it. A commit of some partitions reads only
// the rows of the directories that can hold them. A nil enter accepts every
// directory. enter and fn must not call the database.
func (d *DB) ForEachEntered(prefix string, enter func(dir string) bool, fn func(path string, e Entry) (bool, error)) error {
	if enter == nil {
		return d.ForEachPrefix(prefix, fn)
	}
	pre := []byte(prefix)
	// dirs are the directories of the last row read below prefix, top-down,
	// all entered: the next row shares most of them (rows are in path order),
	// so enter is asked once per directory met.
	var dirs []string
	return d.view(func(tx *bolt.Tx) error {
		c := d.bucket(tx, bIndex).Cursor()
		k, v := c.Seek(pre)
	rows:
		for k != nil && bytes.HasPrefix(k, pre) {
			if onEnteredRead != nil {
				onEnteredRead(k)
			}
			level := 0
			for i := len(pre); i < len(k); i++ {
				if k[i] != '/' {
					continue
				}
				if level < len(dirs) && dirs[level] == string(k[:i]) {
					level++
					continue
				}
				dirs = dirs[:level]
				dir := string(k[:i])
				if !enter(dir) {
					// Past the subtree: '0' is '/'+1.
					k, v = c.Seek([]byte(dir + "0"))
					continue rows
				}
				dirs = append(dirs, dir)
				level++
			}
			e, err := unmarshalEntry(v)
			if err != nil {
				return fmt.Errorf("index %q: %w", k, err)
			}
			if more, err := fn(string(k), e); err != nil || !more {
				return err
			}
			k, v = c.Next()
		}
		return nil
	})
}

// onEnteredRead, when set (tests), is called with each row ForEachEntered's
// cursor lands on.
var onEnteredRead func(path []byte)

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
			return fn(string(k), e)
		})
	})
}

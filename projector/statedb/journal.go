package statedb

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
)

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

// JournalPath is a path's JournalEntry, as AddJournal takes them.
type JournalPath struct {
	Path string
	JournalEntry
}

// AddJournal merges entries into the journal durably (one transaction) and
// sets each to its merged value (what the journal now holds at its path).
// Paths must be distinct. Entries in path order (a Ready's changes are) are
// written as they come; others are sorted first: bbolt inserts a key by
// shifting its node's later keys, so a large batch in random order costs
// quadratic copying.
func (d *DB) AddJournal(entries []JournalPath) error {
	byPath := func(a, b JournalPath) int { return strings.Compare(a.Path, b.Path) }
	if !slices.IsSortedFunc(entries, byPath) {
		slices.SortFunc(entries, byPath)
	}
	return d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		b := tx.Bucket(bJournal)
		for i := range entries {
			p, e := entries[i].Path, &entries[i].JournalEntry
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
		}
		return nil
	})
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

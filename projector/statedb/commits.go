package statedb

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
)

// The commits a host applied at its marks: what it compares with the log to
// tell the history it applied from another one under the same seqs — a server
// restored from an older backup and written to since holds other commits at
// the seqs this cache applied (docs/design.md §4, "Identity"). Beside each
// partition's mark, the commit of the event at the mark; and the HWM's
// commit, the last commit ending at or below the HWM that this host applied.
//
// Each is stored with its seq and counts only while it is the seq of what it
// names: a release before these records moves marks and HWM without them, so
// a record whose seq is not the mark's is unknown, never wrong. A cache made
// by such a release opens with none: the sync fills the HWM's commit once,
// after checking it against the marks and rows (projector/host), and each
// mark's as its partition moves.

var (
	// bCommits holds, per partition, the commit at its mark (Commit).
	bCommits = []byte("commits")
	// kHWMCommit: the HWM's commit (Commit).
	kHWMCommit = []byte("hwm-commit")
)

// Commit is a commit this host applied and the seq of its event there.
type Commit struct {
	Seq ledger.Seq
	ID  string // "" when unknown
}

// Known reports whether c names a commit.
func (c Commit) Known() bool { return c.ID != "" && c.Seq > 0 }

func (c Commit) marshal() []byte {
	b := make([]byte, 8+len(c.ID))
	binary.BigEndian.PutUint64(b, uint64(c.Seq))
	copy(b[8:], c.ID)
	return b
}

func unmarshalCommit(v []byte) (Commit, error) {
	if v == nil {
		return Commit{}, nil
	}
	if len(v) < 8 || len(v) > 8+64 {
		return Commit{}, fmt.Errorf("commit record of %d bytes: %w (%w)", len(v), ErrCorrupt, ledger.ErrInvalid)
	}
	return Commit{Seq: ledger.Seq(binary.BigEndian.Uint64(v)), ID: string(v[8:])}, nil
}

// MarkCommit returns the commit at the partition's mark, if this host
// recorded it there: the zero Commit when it did not, or when the record is of
// another seq than the mark's.
func (d *DB) MarkCommit(partition string) (Commit, error) {
	var c Commit
	err := d.view(func(tx *bolt.Tx) error {
		mk, err := decodeMark(d.bucket(tx, bMarks).Get([]byte(partition)))
		if err != nil {
			return err
		}
		var b *bolt.Bucket
		if b = d.bucket(tx, bCommits); b == nil {
			return nil
		}
		if c, err = unmarshalCommit(b.Get([]byte(partition))); err != nil {
			return err
		}
		if c.Seq != mk.Seq {
			c = Commit{}
		}
		return nil
	})
	return c, err
}

// MarkCommits calls fn for every partition whose mark's commit is recorded
// (see MarkCommit), in partition order, until fn returns false.
func (d *DB) MarkCommits(fn func(partition string, c Commit) bool) error {
	return d.view(func(tx *bolt.Tx) error {
		b, marks := d.bucket(tx, bCommits), d.bucket(tx, bMarks)
		if b == nil {
			return nil
		}
		cur := b.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			c, err := unmarshalCommit(v)
			if err != nil {
				return fmt.Errorf("partition %q: %w", k, err)
			}
			mk, err := decodeMark(marks.Get(k))
			if err != nil {
				return fmt.Errorf("partition %q: %w", k, err)
			}
			if c.Seq != mk.Seq || !c.Known() {
				continue
			}
			if !fn(string(k), c) {
				return nil
			}
		}
		return nil
	})
}

// HWMCommit returns the HWM's commit: the last commit ending at or below the
// HWM this host applied (its seq is the commit's last part's). The zero
// Commit when unknown, or above the HWM (a record no transaction of this
// release wrote).
func (d *DB) HWMCommit() (Commit, error) {
	var c Commit
	err := d.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		var err error
		if c, err = unmarshalCommit(m.Get(kHWMCommit)); err != nil {
			return err
		}
		if c.Seq > ledger.Seq(getU64(m, kHWM)) {
			c = Commit{}
		}
		return nil
	})
	return c, err
}

// PutMarkCommit records the commit at the partition's mark; a zero or
// unknown c removes the record.
func (t *Tx) PutMarkCommit(partition string, c Commit) error {
	b := t.tx.Bucket(bCommits)
	if !c.Known() {
		return b.Delete([]byte(partition))
	}
	return b.Put([]byte(partition), c.marshal())
}

// SetHWMCommit records the HWM's commit (see HWMCommit).
func (t *Tx) SetHWMCommit(c Commit) error {
	m := t.tx.Bucket(bMeta)
	if !c.Known() {
		return m.Delete(kHWMCommit)
	}
	return m.Put(kHWMCommit, c.marshal())
}

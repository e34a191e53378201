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
// partition's mark, the commit of the event at the mark; and the top commit,
// the commit of the event at the highest seq this host applied — at the HWM,
// or above it (the host's own commit that did not start at HWM+1, a scoped
// sync's): a log restored to before it lost it.
//
// A mark's record holds its seq and counts only while it is the mark's seq:
// a release before these records moves marks without them, so a record whose
// seq is not the mark's is unknown, never wrong (and a top commit such a
// release did not move is still one this cache applied). A cache made by such
// a release opens with none: the sync fills the top commit once, at the HWM,
// after checking it against the marks and rows (projector/host), and each
// mark's as its partition moves.

var (
	// bCommits holds, per partition, the commit at its mark (Commit).
	bCommits = []byte("commits")
	// kTopCommit: the top commit (Commit).
	kTopCommit = []byte("top-commit")
	// kTopStamp: the log's stamp of the message at the HWM when this cache
	// last found the log holding its history up to there (Commit: the seq
	// and the stamp; see TopStamp).
	kTopStamp = []byte("top-stamp")
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

// TopCommit returns the top commit: the commit of the event at the highest
// seq this cache applied (the zero Commit when unknown).
func (d *DB) TopCommit() (Commit, error) {
	var c Commit
	err := d.view(func(tx *bolt.Tx) error {
		var err error
		c, err = unmarshalCommit(tx.Bucket(bMeta).Get(kTopCommit))
		return err
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

// SetTopCommit records the top commit (see TopCommit) when c is above the
// one recorded, or when none is.
func (t *Tx) SetTopCommit(c Commit) error {
	m := t.tx.Bucket(bMeta)
	cur, err := unmarshalCommit(m.Get(kTopCommit))
	if err != nil || !c.Known() || cur.Known() && cur.Seq >= c.Seq {
		return err
	}
	return m.Put(kTopCommit, c.marshal())
}

// TopStamp returns the log's stamp (ledger.Head.Stamp) of the message at
// the HWM when this cache last found the log holding its history up to there
// (the top commit and the messages above it): while the log's head is the
// HWM with that stamp, the log holds that history still. "" when unknown, or
// of another seq than the HWM's (the HWM moved since).
func (d *DB) TopStamp() (string, error) {
	var stamp string
	err := d.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		st, err := unmarshalCommit(m.Get(kTopStamp))
		if err != nil {
			return err
		}
		if st.Known() && st.Seq == ledger.Seq(getU64(m, kHWM)) {
			stamp = st.ID
		}
		return nil
	})
	return stamp, err
}

// SetTopStamp records the log's stamp of the message at seq (see TopStamp).
func (t *Tx) SetTopStamp(seq ledger.Seq, stamp string) error {
	m := t.tx.Bucket(bMeta)
	if stamp == "" {
		return m.Delete(kTopStamp)
	}
	return m.Put(kTopStamp, Commit{Seq: seq, ID: stamp}.marshal())
}

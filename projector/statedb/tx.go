package statedb

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
)

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

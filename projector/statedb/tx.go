package statedb

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/syncledger/syncledger/ledger"
)

// Tx is a write transaction.
type Tx struct {
	tx   *bolt.Tx
	fill fillGauge // the transaction's new index rows, for the index's fill
}

// denseFill is the index bucket's FillPercent in a transaction whose new rows
// mostly come in key order (bbolt's default, 0.5, leaves every page it splits
// half empty, and a cold commit inserts in path order).
const denseFill = 0.9

// fillGauge counts a transaction's new index rows (paths that had none) and,
// among them, the ones that continue a run: that sort right after the
// previous new row, with no row between them.
type fillGauge struct {
	news, runs int
	last       string // the previous new row's path, if has
	has        bool
	lastEnd    bool // last sorted after every other row when it was put
}

// dense reports whether at least half of the new rows continued a run.
func (g *fillGauge) dense() bool { return g.news > 0 && 2*g.runs >= g.news }

// Update runs fn in one durable transaction (fsynced on commit). Every write
// transaction advances the generation (see Gen).
func (d *DB) Update(fn func(*Tx) error) error {
	return d.update(func(tx *bolt.Tx) error {
		if err := bumpGen(tx); err != nil {
			return err
		}
		t := &Tx{tx: tx}
		if err := fn(t); err != nil {
			return err
		}
		// bbolt reads FillPercent when it splits the transaction's dirty
		// nodes, at commit (node.spill): set now, it applies to all of them.
		if t.fill.dense() {
			tx.Bucket(bIndex).FillPercent = denseFill
		}
		return nil
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
	if err := t.countLazy(path, e.Lazy, true); err != nil {
		return err
	}
	return t.tx.Bucket(bIndex).Put([]byte(path), e.marshal())
}

// Delete removes path's index entry.
func (t *Tx) Delete(path string) error {
	if err := t.countLazy(path, false, false); err != nil {
		return err
	}
	return t.tx.Bucket(bIndex).Delete([]byte(path))
}

// countLazy keeps the lazy counter equal to the number of lazy entries, and
// the fill gauge up to date (put: path gets a row). One seek tells both
// whether path had a row and, if not, which row precedes it.
func (t *Tx) countLazy(path string, lazy, put bool) error {
	key := []byte(path)
	c := t.tx.Bucket(bIndex).Cursor()
	k, v := c.Seek(key)
	was := false
	if k != nil && bytes.Equal(k, key) {
		old, err := unmarshalEntry(v)
		if err != nil {
			return err
		}
		was = old.Lazy
		if !put && t.fill.has && t.fill.last == path {
			t.fill.has = false
		}
	} else if put {
		t.fill.news++
		if t.fill.has {
			var run bool
			if k == nil { // path sorts after every row
				run = t.fill.lastEnd
			} else {
				p, _ := c.Prev()
				run = p != nil && string(p) == t.fill.last
			}
			if run {
				t.fill.runs++
			}
		}
		t.fill.last, t.fill.has, t.fill.lastEnd = path, true, k == nil
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

// Reset empties marks, index, HWM and the commits recorded at them (a full
// rebuild starts a new state).
func (t *Tx) Reset() error {
	t.fill.has = false
	for _, b := range [][]byte{bMarks, bIndex, bCommits} { // not the journal: see JournalEntry
		if err := t.tx.DeleteBucket(b); err != nil {
			return err
		}
		if _, err := t.tx.CreateBucket(b); err != nil {
			return err
		}
	}
	m := t.tx.Bucket(bMeta)
	for _, k := range [][]byte{kHWM, kLazy, kRestoring, kTopCommit, kTopStamp} {
		if err := m.Delete(k); err != nil {
			return err
		}
	}
	return m.Delete(kLedger)
}

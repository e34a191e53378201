package host

import (
	"context"
	"fmt"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/statedb"
)

// TestReadsFollowTheChange: a sync applying one event and a commit of one
// file from a dirty set read a few rows of the state database, the same
// number whatever the size of the index (issue 17: the core reads its index
// through projector.Storage instead of loading it). The rows are counted
// through the Host's stateRows: the core's projector.Storage and the shell's
// lookups.
func TestReadsFollowTheChange(t *testing.T) {
	reads := func(t *testing.T, pad int) (syncRows, commitRows uint64) {
		e := newEnv(t)
		a, b := e.host("a"), e.host("b")
		writeFile(t, b, "data/t/b/d/1/raw", "b0")
		mustCommit(t, b, "b0")
		// The padding: index rows of other partitions, as a synced cache of
		// pad files holds (their files are not needed: nothing reads them).
		err := b.View(func(db *statedb.DB) error {
			return db.Update(func(tx *statedb.Tx) error {
				for i := range pad {
					p := fmt.Sprintf("data/pad/m%03d/f/%d/raw", i%100, i)
					if err := tx.Put(p, statedb.Entry{Digest: ledger.DigestOf([]byte(p)), Size: int64(len(p)), Mode: 0o644}); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		count := func(op func()) uint64 { return rowsRead(t, b, op) }
		mustSync(t, a, SyncOptions{})
		writeFile(t, a, "data/t/b/d/1/raw", "a1") // b's file, changed by a
		mustCommit(t, a, "a1")
		syncRows = count(func() {
			if res := mustSync(t, b, SyncOptions{}); res.Written != 1 {
				t.Fatalf("sync wrote %d files, want 1", res.Written)
			}
		})
		writeFile(t, b, "data/t/b/d/1/raw", "b1")
		commitRows = count(func() {
			res, err := b.Commit(context.Background(), CommitOptions{Changed: []string{"data/t/b/d/1/raw"}})
			if err != nil || res.Written != 1 {
				t.Fatalf("commit from the dirty set: %+v, %v", res, err)
			}
		})
		// The count sees whole reads: a status reads every row.
		if st := count(func() { mustStatus(t, b) }); st < uint64(pad) {
			t.Fatalf("a status read %d rows of an index of %d", st, pad+1)
		}
		return syncRows, commitRows
	}
	s0, c0 := reads(t, 0)
	s1, c1 := reads(t, 20_000)
	t.Logf("rows read: sync of 1 event %d (index of 1 row) and %d (20,001 rows); commit of 1 file %d and %d", s0, s1, c0, c1)
	if s1 != s0 || c1 != c0 || s1 > 32 || c1 > 32 {
		t.Errorf("rows read by a sync of 1 event: %d with 1 indexed row, %d with 20,001; by a commit of 1 file: %d and %d; want the same few at both sizes", s0, s1, c0, c1)
	}
}

// TestPartitionCommitReadsItsRows: a commit of one partition
// (CommitOptions.Partitions) reads the index rows of the directories that
// can hold it, not those of the other partitions (issue 29: the scan's
// search for deletions read the whole index, then kept its partition's).
func TestPartitionCommitReadsItsRows(t *testing.T) {
	reads := func(t *testing.T, pad int) uint64 {
		e := newEnv(t)
		h := e.host("a")
		for i := range 3 {
			writeFile(t, h, fmt.Sprintf("data/t/id1/f%d.json", i), "v0")
		}
		writeFile(t, h, "data/t/id2/f.json", "v0")
		mustCommit(t, h, "v0")
		// Other partitions' rows (as a synced cache of pad files holds), some
		// sorting before the committed one's, some after, some beside it.
		err := h.View(func(db *statedb.DB) error {
			return db.Update(func(tx *statedb.Tx) error {
				for i := range pad {
					for _, p := range []string{fmt.Sprintf("data/pad/m%03d/f/%d/raw", i%100, i), fmt.Sprintf("data/t/o%03d/%d/raw", i%100, i), fmt.Sprintf("data/u/m%03d/%d", i%100, i)} {
						if err := tx.Put(p, statedb.Entry{Digest: ledger.DigestOf([]byte(p)), Size: int64(len(p)), Mode: 0o644}); err != nil {
							return err
						}
					}
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, h, "data/t/id1/f1.json", "v1")
		return rowsRead(t, h, func() {
			res, err := h.Commit(context.Background(), CommitOptions{Message: "v1", Partitions: []string{"data--t--id1"}})
			if err != nil || res.Written != 1 || res.Deleted != 0 {
				t.Fatalf("commit of data--t--id1: %+v, %v", res, err)
			}
		})
	}
	r0, r1 := reads(t, 0), reads(t, 10_000)
	t.Logf("rows read by a commit of one partition of 3 files: %d beside 1 other partition's row, %d beside 30,001", r0, r1)
	if r1 != r0 || r1 > 32 {
		t.Errorf("rows read by a commit of one partition: %d beside 1 other partition's row, %d beside 30,001; want the same few", r0, r1)
	}
}

// rowsRead returns how many rows op reads through h's state, op run while
// the test holds h's cache (op's own holds share the counted rows).
func rowsRead(t *testing.T, h *Host, op func()) uint64 {
	t.Helper()
	release, err := h.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	c := &countingRows{stateRows: h.rows}
	h.rows = c
	defer func() { h.rows = c.stateRows }()
	op()
	return c.n
}

// countingRows counts the index entries and marks read through it: every row
// a lookup finds or a loop hands out (HardState and Under read none).
type countingRows struct {
	stateRows
	n uint64
}

func (c *countingRows) Mark(p string) (projector.Mark, error) {
	m, err := c.stateRows.Mark(p)
	if m != (projector.Mark{}) {
		c.n++
	}
	return m, err
}

func (c *countingRows) Marks(fn func(string, projector.Mark) bool) error {
	return c.stateRows.Marks(func(p string, m projector.Mark) bool { c.n++; return fn(p, m) })
}

func (c *countingRows) File(p string) (projector.File, bool, error) {
	f, ok, err := c.stateRows.File(p)
	if ok {
		c.n++
	}
	return f, ok, err
}

func (c *countingRows) Files(prefix string, fn func(string, projector.File) bool) error {
	return c.stateRows.Files(prefix, func(p string, f projector.File) bool { c.n++; return fn(p, f) })
}

func (c *countingRows) Get(p string) (statedb.Entry, bool, error) {
	e, ok, err := c.stateRows.Get(p)
	if ok {
		c.n++
	}
	return e, ok, err
}

func (c *countingRows) ForEachPrefix(prefix string, fn func(string, statedb.Entry) (bool, error)) error {
	return c.stateRows.ForEachPrefix(prefix, func(p string, e statedb.Entry) (bool, error) { c.n++; return fn(p, e) })
}

func (c *countingRows) ForEachEntered(prefix string, enter func(string) bool, fn func(string, statedb.Entry) (bool, error)) error {
	return c.stateRows.ForEachEntered(prefix, enter, func(p string, e statedb.Entry) (bool, error) { c.n++; return fn(p, e) })
}

func (c *countingRows) ForEach(fn func(string, statedb.Entry) error) error {
	return c.stateRows.ForEach(func(p string, e statedb.Entry) error { c.n++; return fn(p, e) })
}

func (c *countingRows) Load() (statedb.State, error) {
	st, err := c.stateRows.Load()
	c.n += uint64(len(st.Marks))
	return st, err
}

package projector

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// Storage is the core's read access to the durable state the shell persisted:
// lineage, HWM, marks and the index (etcd raft's Storage is the model). The
// core reads through it only the rows a step needs — a partition's mark, a
// path's row, whether rows lie under a directory — so that its cost follows
// the change, not the size of the index; only a full read (State, Restore,
// ShadowedFiles) iterates every row.
//
// The core never writes to a Storage: the shell persists each Ready into it
// (one atomic transaction) and then calls Core.Advance, so that every read
// after Advance sees the Ready's state. A read that fails (a row that does not
// decode) fails the core's call that made it, which stages nothing.
//
// projector/statedb implements it over the cache's bbolt database; a
// MemoryStorage serves tests, the simulator and in-memory replays
// (projector/snapshot).
type Storage interface {
	// HardState returns the lineage ("" before one was adopted) and the HWM.
	HardState() (lineage string, hwm ledger.Seq, err error)
	// Mark returns the mark of a partition (the zero Mark if none).
	Mark(partition string) (Mark, error)
	// Marks calls fn for every partition's mark, in partition order, until
	// fn returns false.
	Marks(fn func(partition string, m Mark) bool) error
	// File returns the index row of path.
	File(path string) (File, bool, error)
	// Under reports whether any index row lies under dir: a path that starts
	// with dir + "/".
	Under(dir string) (bool, error)
	// Files calls fn for every index row whose path starts with prefix, in
	// path order, until fn returns false. fn must not call the Storage.
	Files(prefix string, fn func(path string, f File) bool) error
}

// MemoryStorage is a Storage held in memory, as etcd raft's MemoryStorage: the
// owner persists each Ready into it with Apply before calling Core.Advance.
// It is not safe for concurrent use.
type MemoryStorage struct {
	st State
	// dirs counts the rows under each directory (Under in O(1)).
	dirs map[string]int
}

// NewMemoryStorage returns a MemoryStorage holding a copy of st, which must be
// a valid state (an error wrapping ledger.ErrInvalid otherwise).
func NewMemoryStorage(st State) (*MemoryStorage, error) {
	if err := st.validate(); err != nil {
		return nil, err
	}
	m := &MemoryStorage{st: st.Clone(), dirs: map[string]int{}}
	for p := range m.st.Files {
		addDirs(m.dirs, p, 1)
	}
	return m, nil
}

// Apply persists rd, as the shell's transaction does: a Reset empties the
// index and marks first; then the lineage (when set), every Change's row (nil
// New deletes it), the Marks and the HWM.
func (m *MemoryStorage) Apply(rd Ready) {
	if rd.Reset {
		m.st.Files, m.st.Marks, m.st.HWM = map[string]File{}, map[string]Mark{}, 0
		clear(m.dirs)
	}
	if rd.Ledger != "" {
		m.st.Ledger = rd.Ledger
	}
	for _, ch := range rd.Changes {
		_, had := m.st.Files[ch.Path]
		switch {
		case ch.New == nil && had:
			delete(m.st.Files, ch.Path)
			addDirs(m.dirs, ch.Path, -1)
		case ch.New != nil:
			m.st.Files[ch.Path] = *ch.New
			if !had {
				addDirs(m.dirs, ch.Path, 1)
			}
		}
	}
	maps.Copy(m.st.Marks, rd.Marks)
	m.st.HWM = rd.HWM
}

// HardState implements Storage.
func (m *MemoryStorage) HardState() (string, ledger.Seq, error) { return m.st.Ledger, m.st.HWM, nil }

// Mark implements Storage.
func (m *MemoryStorage) Mark(partition string) (Mark, error) { return m.st.Marks[partition], nil }

// Marks implements Storage.
func (m *MemoryStorage) Marks(fn func(string, Mark) bool) error {
	for _, p := range slices.Sorted(maps.Keys(m.st.Marks)) {
		if !fn(p, m.st.Marks[p]) {
			break
		}
	}
	return nil
}

// File implements Storage.
func (m *MemoryStorage) File(path string) (File, bool, error) {
	f, ok := m.st.Files[path]
	return f, ok, nil
}

// Under implements Storage.
func (m *MemoryStorage) Under(dir string) (bool, error) { return m.dirs[dir] > 0, nil }

// Files implements Storage. It sorts the paths it visits: O(n log n) for n
// rows, which a MemoryStorage's uses afford.
func (m *MemoryStorage) Files(prefix string, fn func(string, File) bool) error {
	var paths []string
	for p := range m.st.Files {
		if strings.HasPrefix(p, prefix) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		if !fn(p, m.st.Files[p]) {
			break
		}
	}
	return nil
}

// ReadState reads the whole durable state of s: every mark and every row.
func ReadState(s Storage) (State, error) {
	st := State{Marks: map[string]Mark{}, Files: map[string]File{}}
	var err error
	if st.Ledger, st.HWM, err = s.HardState(); err != nil {
		return State{}, fmt.Errorf("read state: %w", err)
	}
	if err := s.Marks(func(p string, m Mark) bool { st.Marks[p] = m; return true }); err != nil {
		return State{}, fmt.Errorf("read marks: %w", err)
	}
	if err := s.Files("", func(p string, f File) bool { st.Files[p] = f; return true }); err != nil {
		return State{}, fmt.Errorf("read index: %w", err)
	}
	return st, nil
}

// checkMark checks a mark read from the storage.
func checkMark(p string, m Mark) error {
	if p == "" || (m.ModelSeq == 0) != (m.Seq == 0) || m.ModelSeq > uint64(m.Seq) {
		return fmt.Errorf("mark of partition %q is modelSeq %d at seq %d: %w", p, m.ModelSeq, m.Seq, ledger.ErrInvalid)
	}
	return nil
}

// checkFile checks an index row read from the storage.
func checkFile(p string, f File) error {
	if err := ledger.ValidatePath(p); err != nil {
		return err
	}
	if f.Size < 0 {
		return fmt.Errorf("index row %q has size %d: %w", p, f.Size, ledger.ErrInvalid)
	}
	return nil
}

// The core's reads of its storage, checked and with the call named in errors.

func (c *Core) mark(p string) (Mark, error) {
	m, err := c.store.Mark(p)
	if err != nil {
		return Mark{}, fmt.Errorf("read mark of partition %q: %w", p, err)
	}
	if m != (Mark{}) {
		if err := checkMark(p, m); err != nil {
			return Mark{}, err
		}
	}
	return m, nil
}

func (c *Core) file(p string) (File, bool, error) {
	f, ok, err := c.store.File(p)
	if err != nil {
		return File{}, false, fmt.Errorf("read index row %q: %w", p, err)
	}
	if ok && f.Size < 0 {
		return File{}, false, checkFile(p, f)
	}
	return f, ok, nil
}

func (c *Core) under(dir string) (bool, error) {
	ok, err := c.store.Under(dir)
	if err != nil {
		return false, fmt.Errorf("read index under %q: %w", dir, err)
	}
	return ok, nil
}

// files iterates the durable rows under prefix, checking each.
func (c *Core) files(prefix string, fn func(string, File) bool) error {
	var bad error
	err := c.store.Files(prefix, func(p string, f File) bool {
		if bad = checkFile(p, f); bad != nil {
			return false
		}
		return fn(p, f)
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	return nil
}

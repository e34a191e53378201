package projector

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

// Helpers of the tests: a Core over a MemoryStorage, whose reads cannot fail,
// so the reads' errors become panics.

// newCoreOf returns a Core over a MemoryStorage holding st.
func newCoreOf(st State, cfg Config) (*Core, error) {
	ms, err := NewMemoryStorage(st)
	if err != nil {
		return nil, err
	}
	return New(ms, cfg)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (c *Core) mustReady() Ready           { return must(c.Ready()) }
func (c *Core) mustState() State           { return must(c.State()) }
func (c *Core) mustMark(p string) Mark     { return must(c.Mark(p)) }
func (c *Core) mustShadowed(p string) bool { return must(c.Shadowed(p)) }

// persistAdvance is the shell's last two steps: rd persisted into the core's
// MemoryStorage, then Advance. It persists the core's own copy of the Ready
// (what a shell that did not alter it would), so a test may alter its copy to
// check that the core keeps its own.
func (c *Core) persistAdvance(rd Ready) {
	if c.out != nil && c.out.id == rd.id {
		c.store.(*MemoryStorage).Apply(c.out.clone())
	} else {
		c.store.(*MemoryStorage).Apply(rd)
	}
	c.Advance(rd)
}

// TestMemoryStorageReads checks MemoryStorage's queries against the plain
// state they answer for.
func TestMemoryStorageReads(t *testing.T) {
	st := State{Ledger: testLedger, HWM: 4, Marks: map[string]Mark{"b": {1, 2}, "a": {2, 4}}, Files: map[string]File{
		"a/x": {Size: 1}, "a/y/z": {Size: 2}, "a-b": {Size: 3}, "b": {Size: 4},
	}}
	ms, err := NewMemoryStorage(st)
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{"a": true, "a/y": true, "a/x": false, "a-b": false, "b": false, "c": false} {
		if got, _ := ms.Under(dir); got != want {
			t.Errorf("Under(%q) = %v, want %v", dir, got, want)
		}
	}
	var got []string
	_ = ms.Files("a", func(p string, _ File) bool { got = append(got, p); return true })
	if want := []string{"a-b", "a/x", "a/y/z"}; !slices.Equal(got, want) {
		t.Errorf("Files(\"a\") = %q, want %q", got, want)
	}
	var parts []string
	_ = ms.Marks(func(p string, _ Mark) bool { parts = append(parts, p); return false })
	if !slices.Equal(parts, []string{"a"}) {
		t.Errorf("Marks stopped early = %q, want [a]", parts)
	}
	st.Files["c"] = File{} // NewMemoryStorage copies
	if _, ok, _ := ms.File("c"); ok {
		t.Error("NewMemoryStorage shares the caller's maps")
	}
	ms.Apply(Ready{HWM: 5, Changes: []Change{{Path: "a/y/z"}, {Path: "a/y/w/v", New: &File{Size: 5}}}})
	if ok, _ := ms.Under("a/y/w"); !ok {
		t.Error("Apply did not count the new row under a/y/w")
	}
	ms.Apply(Ready{HWM: 6, Changes: []Change{{Path: "a/y/w/v"}}})
	if ok, _ := ms.Under("a/y"); ok {
		t.Error("rows under a/y after both were deleted")
	}
	ms.Apply(Ready{Reset: true, Ledger: testLedger, HWM: 1, Marks: map[string]Mark{"z": {1, 1}}, Changes: []Change{{Path: "z", New: &File{}}}})
	got2, _ := ReadState(ms)
	if want := (State{Ledger: testLedger, HWM: 1, Marks: map[string]Mark{"z": {1, 1}}, Files: map[string]File{"z": {}}}); !equalState(got2, want) {
		t.Errorf("after a reset: %+v, want %+v", got2, want)
	}
}

// TestShadowScan checks the one-pass scan of ShadowedFiles against
// ShadowedPaths on random sets of paths over a few names.
func TestShadowScan(t *testing.T) {
	names := []string{"a", "a-b", "a.c", "a/b", "a/b/c", "a/b-c", "a/b/c/d", "a0", "b", "b/a", "a/b.c/d", "a-b/c"}
	for mask := 1; mask < 1<<len(names); mask += 7 {
		var paths []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				paths = append(paths, n)
			}
		}
		slices.Sort(paths)
		var sc shadowScan
		for _, p := range paths {
			sc.add(p)
		}
		slices.Sort(sc.out)
		if want := ShadowedPaths(paths); !slices.Equal(sc.out, want) && !(len(sc.out) == 0 && len(want) == 0) {
			t.Fatalf("paths %q: scan says %q shadowed, want %q", paths, sc.out, want)
		}
	}
}

// failingStorage fails every read after the first n.
type failingStorage struct {
	*MemoryStorage
	n int
}

var errRead = errors.New("read fails")

func (f *failingStorage) fail() bool { f.n--; return f.n < 0 }

func (f *failingStorage) Mark(p string) (Mark, error) {
	if f.fail() {
		return Mark{}, errRead
	}
	return f.MemoryStorage.Mark(p)
}

func (f *failingStorage) File(p string) (File, bool, error) {
	if f.fail() {
		return File{}, false, errRead
	}
	return f.MemoryStorage.File(p)
}

func (f *failingStorage) Under(d string) (bool, error) {
	if f.fail() {
		return false, errRead
	}
	return f.MemoryStorage.Under(d)
}

func (f *failingStorage) Files(pre string, fn func(string, File) bool) error {
	if f.fail() {
		return errRead
	}
	return f.MemoryStorage.Files(pre, fn)
}

// TestStorageErrors: a read that fails fails the call that made it, with the
// read's error, and stages nothing that would differ: offered again once reads
// succeed, the same records give the Ready of a run that never failed.
func TestStorageErrors(t *testing.T) {
	recs := []ledger.Record{rec("a", 6, 3, 5, "a3"), rec("b", 7, 2, 3, "b2")}
	run := func(c *Core) (Ready, error) {
		for _, r := range recs {
			if _, err := c.Step(Full, r); err != nil {
				return Ready{}, err
			}
		}
		return c.Ready()
	}
	want := must(run(must(newCoreOf(baseState(), Config{Lazy: true}))))
	failed := 0
	for n := 0; ; n++ {
		fs := &failingStorage{MemoryStorage: must(NewMemoryStorage(baseState())), n: 1 << 30}
		c := must(New(fs, Config{Lazy: true}))
		fs.n = n
		rd, err := run(c)
		if err == nil && fs.n >= 0 {
			break // every read of the run was allowed
		}
		if !errors.Is(err, errRead) {
			t.Fatalf("with %d reads allowed: %v, want the read's error", n, err)
		}
		failed++
		fs.n = 1 << 30
		if rd, err = run(c); err != nil {
			t.Fatalf("with %d reads allowed, then all: %v", n, err)
		}
		if d := cmp.Diff(want.Changes, rd.Changes); d != "" || rd.HWM != want.HWM || !maps.Equal(rd.Marks, want.Marks) {
			t.Fatalf("with %d reads allowed, then all: Ready differs (HWM %d, marks %v; want %d, %v):\n%s", n, rd.HWM, rd.Marks, want.HWM, want.Marks, d)
		}
	}
	if failed < 3 {
		t.Fatalf("only %d runs hit a failing read: the test reads too little", failed)
	}
}

func must2[T, U any](v T, w U, err error) (T, U) {
	if err != nil {
		panic(err)
	}
	return v, w
}

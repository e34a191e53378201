package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// A cache is found from any directory inside it.
func TestFindCache(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, ok := FindCache(deep); ok {
		t.Fatalf("FindCache outside a cache = %s", dir)
	}
	if err := os.Mkdir(filepath.Join(root, ledger.StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, ok := FindCache(deep); !ok || dir != root {
		t.Fatalf("FindCache(%s) = %s %v, want %s", deep, dir, ok, root)
	}
}

// idWorld opens caches of one ledger as OpenAs does, on machine, with the
// ids the heartbeats hold (taken) and the notes told.
type idWorld struct {
	e     *env
	taken map[string]bool
	notes []string
}

func (w *idWorld) open(dir, machine, given string) (string, *Host) {
	w.e.t.Helper()
	h, id, err := OpenAs(dir, IDConfig{Given: given, Machine: machine, Taken: func(id string) bool { return w.taken[id] },
		Note: func(m string) { w.notes = append(w.notes, m) }}, func(id string) (*Host, error) {
		return Open(Config{Cache: dir, Host: id, Log: w.e.log, Blobs: w.e.blobs})
	})
	if err != nil {
		w.e.t.Fatal(err)
	}
	own, stored, err := CacheHostID(dir)
	if err != nil || !stored {
		w.e.t.Fatalf("the cache at %s has no id after its open: %v", dir, err)
	}
	h.Close()
	w.taken[own] = true // it synced: the heartbeats hold it
	return id, h
}

func (w *idWorld) note() string {
	n := strings.Join(w.notes, "\n")
	w.notes = nil
	return n
}

// A new cache is host USER@HOST; a second cache where that id is taken gets
// a suffix and says so; a cache keeps its id when reopened and when moved
// (the same state directory at another path); a copy — on another machine,
// or in another directory of this one — gets an id of its own and says so
// once; a given id names the host whatever the cache's own (issue 39).
func TestHostIDs(t *testing.T) {
	t.Parallel()
	w := &idWorld{e: newEnv(t), taken: map[string]bool{}}
	base := t.TempDir()
	dir := func(name string) string { return filepath.Join(base, name) }
	def := DefaultHostID()
	if user, machine, ok := strings.Cut(def, "@"); !ok || user == "" || machine == "" || strings.Contains(machine, ".") {
		t.Fatalf("DefaultHostID() = %q, want USER@HOST", def)
	}
	if id, stored, err := CacheHostID(dir("a")); id != def || stored || err != nil {
		t.Fatalf("CacheHostID of no cache = %q %v %v, want %q, not stored", id, stored, err, def)
	}

	if id, _ := w.open(dir("a"), "m1", ""); id != def || w.note() != "" {
		t.Fatalf("first cache: id %q notes %q; want %q and no note", id, w.notes, def)
	}
	b, _ := w.open(dir("b"), "m1", "")
	if !strings.HasPrefix(b, def+"-") || len(b) != len(def)+7 {
		t.Fatalf("second cache: id %q, want %s-XXXXXX", b, def)
	}
	if n := w.note(); !strings.Contains(n, b) || !strings.Contains(n, "--host NAME") {
		t.Errorf("second cache's note %q: want its id and --host", n)
	}
	if id, _ := w.open(dir("a"), "m1", ""); id != def || w.note() != "" {
		t.Fatalf("reopened: id %q notes %q; want %q, no note", id, w.notes, def)
	}

	// Moved: the same cache.
	if err := os.Rename(dir("a"), dir("a2")); err != nil {
		t.Fatal(err)
	}
	if id, _ := w.open(dir("a2"), "m1", ""); id != def || w.note() != "" {
		t.Fatalf("moved: id %q notes %q; want %q, no note", id, w.notes, def)
	}
	// Copied within the machine: another host, said once.
	if out, err := exec.Command("cp", "-a", dir("a2"), dir("c")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	c, _ := w.open(dir("c"), "m1", "")
	if c == def || c == b {
		t.Fatalf("copied cache: id %q, want a new one", c)
	}
	if n := w.note(); !strings.Contains(n, "copy of host "+def) || !strings.Contains(n, "host "+c) {
		t.Errorf("copied cache's note %q", n)
	}
	if id, _ := w.open(dir("c"), "m1", ""); id != c || w.note() != "" {
		t.Fatalf("copy reopened: id %q notes %q; want %q, no note", id, w.notes, c)
	}
	if id, _ := w.open(dir("a2"), "m1", ""); id != def {
		t.Fatalf("the original after the copy: %q, want %q", id, def)
	}
	// Put on another machine at the same path (a repo copied to a new laptop).
	d, _ := w.open(dir("a2"), "m2", "")
	if d == def {
		t.Fatalf("on another machine: id %q, want a new one", d)
	}
	if n := w.note(); !strings.Contains(n, "another machine's") {
		t.Errorf("another machine's note %q", n)
	}
	// A given id names the host; a copy given its original's id is told so.
	if out, err := exec.Command("cp", "-a", dir("b"), dir("e")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if id, _ := w.open(dir("e"), "m1", b); id != b {
		t.Fatalf("given %q: opened as %q", b, id)
	}
	if n := w.note(); !strings.Contains(n, "given that host's id too") {
		t.Errorf("a copy given its original's id: note %q", n)
	}
	if own, _, _ := CacheHostID(dir("e")); own == b {
		t.Errorf("the copy's own id is still its original's, %q", own)
	}
}

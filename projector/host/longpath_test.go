package host

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger"
)

// TestLongCacheRoot is issue 38 point 9: host a, whose cache root is short,
// commits a valid file 3.9 KB deep; host b, whose cache root is a few hundred
// bytes longer, failed every sync with "file name too long" (root and path
// together are more than PATH_MAX), its HWM below that commit for good. Now b
// applies it, and the file is b's as any other: its scan sees it (no "not
// synced" warning), b commits an edit of it, and a's deletion removes it and
// the directories it leaves empty.
func TestLongCacheRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.host("a")
	root := t.TempDir()
	for len(root) < 600 {
		root = filepath.Join(root, strings.Repeat("r", 200))
	}
	var logged testmain.SyncBuffer
	b, err := Open(Config{Cache: root, Host: "b", Log: e.log, Blobs: e.blobs, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	top := strings.Repeat("d", 200)
	deep := "notes/" + strings.Repeat(top+"/", 18) + "raw" // 3,624 bytes
	if err := ledger.ValidatePath(deep); err != nil {
		t.Fatal(err)
	}
	if len(a.Dir().Root())+1+len(deep) >= 4096 || len(root)+1+len(deep) <= 4096 {
		t.Fatalf("test setup: roots of %d and %d bytes, path of %d", len(a.Dir().Root()), len(root), len(deep))
	}
	writeFile(t, a, deep, "v1")
	writeFile(t, a, "notes/short", "s")
	mustCommit(t, a, "deep")

	mustSync(t, b, SyncOptions{})
	if got := readDeep(t, b, deep); got != "v1" {
		t.Fatalf("b's %s…: %q, want v1", deep[:20], got)
	}
	st := mustStatus(t, b)
	if st.HWM != st.Head || len(st.Dirty) != 0 {
		t.Fatalf("b: hwm %d, head %d, dirty %d", st.HWM, st.Head, len(st.Dirty))
	}

	// b's own edit of the deep file is committed and reaches a.
	r, err := os.OpenRoot(b.Dir().Root())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteFile(filepath.FromSlash(deep), []byte("v2 from b"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustCommit(t, b, "edit")
	if len(res.Paths) != 1 || res.Paths[0] != deep {
		t.Fatalf("b committed %d paths, want the deep one", len(res.Paths))
	}
	if strings.Contains(logged.String(), "not synced") {
		t.Fatalf("b's scan warned:\n%s", logged.String())
	}
	mustSync(t, a, SyncOptions{})
	if got, _ := readFile(t, a, deep); got != "v2 from b" {
		t.Fatalf("a's deep file: %q", got)
	}

	// a's deletion removes it on b, with the directories it empties.
	if err := os.RemoveAll(filepath.Join(a.Dir().Root(), "notes", top)); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, a, "delete")
	mustSync(t, b, SyncOptions{})
	if _, err := os.Lstat(filepath.Join(root, "notes", top)); !os.IsNotExist(err) {
		t.Fatalf("b keeps the deep directories: %v", err)
	}
	if got, _ := readFile(t, b, "notes/short"); got != "s" {
		t.Fatalf("b's notes/short: %q", got)
	}
	if st := mustStatus(t, b); st.HWM != st.Head || len(st.Dirty) != 0 {
		t.Fatalf("b: hwm %d, head %d, dirty %v", st.HWM, st.Head, st.Dirty)
	}
}

// readDeep reads rel in h's cache however long the whole path is.
func readDeep(t *testing.T, h *Host, rel string) string {
	t.Helper()
	f, err := h.Dir().Open(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

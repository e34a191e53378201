package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCommitChanged: a commit limited to the paths a dirty set names commits
// changes, deletions and whole directories among them, commits nothing else,
// and an empty set commits nothing without reading the index; the ignore file
// among them makes the commit scan the whole cache.
func TestCommitChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "m/1", "one")
	writeFile(t, a, "m/2", "two")
	writeFile(t, a, "d/x/1", "x1")
	writeFile(t, a, "d/x/2", "x2")
	mustCommit(t, a, "")
	ctx := context.Background()
	commit := func(changed ...string) CommitResult {
		t.Helper()
		if changed == nil {
			changed = []string{}
		}
		res, err := a.Commit(ctx, CommitOptions{Changed: changed})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	writeFile(t, a, "m/1", "one, changed")
	writeFile(t, a, "m/3", "three")
	if res := commit(); !res.Nothing {
		t.Fatalf("empty set committed %v", res.Paths)
	}
	if res := commit("m/3"); !cmp.Equal(res.Paths, []string{"m/3"}) {
		t.Fatalf("set [m/3] committed %v", res.Paths)
	}
	if res := commit("m/1", "nosuch"); !cmp.Equal(res.Paths, []string{"m/1"}) {
		t.Fatalf("set [m/1 nosuch] committed %v", res.Paths)
	}
	// A path named twice, or with a directory above it also named, is one
	// change (a dirty set and swamp's hints may repeat paths).
	writeFile(t, a, "m/1", "one, changed again")
	writeFile(t, a, "m/4", "four")
	if res := commit("m/1", "m/4", "/m/1/", "m", "m/1"); !cmp.Equal(res.Paths, []string{"m/1", "m/4"}) {
		t.Fatalf("set [m/1 m/4 /m/1/ m m/1] committed %v", res.Paths)
	}

	// A directory stands for its subtree: removed files are deletions, new ones
	// additions; rows outside it are not deletions.
	if err := os.RemoveAll(filepath.Join(a.Dir().Root(), "d", "x")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a, "d/y/new", "new")
	if err := os.Remove(filepath.Join(a.Dir().Root(), "m", "2")); err != nil {
		t.Fatal(err)
	}
	res := commit("d")
	if !cmp.Equal(res.Paths, []string{"d/x/1", "d/x/2", "d/y/new"}) || res.Deleted != 2 {
		t.Fatalf("set [d] committed %v (%d deleted)", res.Paths, res.Deleted)
	}
	// m/2 was not named: still there for a full scan.
	if res := mustCommit(t, a, ""); !cmp.Equal(res.Paths, []string{"m/2"}) {
		t.Fatalf("full scan committed %v, want m/2", res.Paths)
	}

	// The ignore file among the paths: the whole cache is scanned.
	writeFile(t, a, "unnamed", "u")
	writeFile(t, a, ".syncledgerignore", "nothing\n")
	if res := commit(".syncledgerignore"); !cmp.Equal(res.Paths, []string{".syncledgerignore", "unnamed"}) {
		t.Fatalf("set [.syncledgerignore] committed %v, want a full scan's", res.Paths)
	}

	mustSync(t, b, SyncOptions{})
	if got, want := cacheFiles(t, b), cacheFiles(t, a); !cmp.Equal(got, want) {
		t.Fatalf("b's cache differs from a's: %s", cmp.Diff(want, got))
	}
}

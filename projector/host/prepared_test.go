package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The work done ahead of a push is the push's: files hashed and stored by
// PrepareFiles (swamp's hints) are not read again by the Prepare after
// them, nor any file by the Commit given the Prepare's Prepared — a large
// (streamed) file, and one whose mtime was set to a whole second (tar,
// rsync -t) included — and the commit publishes them all. A Commit given
// none reads them again.
func TestPreparedReadOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.host("a")
	writeFile(t, a, "data/m/x/hinted", "by a hint")
	writeFile(t, a, "data/m/x/small", "small")
	writeFile(t, a, "data/m/y/large", strings.Repeat("L", smallFile+10))
	writeFile(t, a, "data/m/z/whole", "whole second")
	whole := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(a.Dir().Root(), "data/m/z/whole"), whole, whole); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pr := NewPrepared()
	if err := a.PrepareFiles(ctx, e.blobs, []string{"data/m/x/hinted"}, pr, nil); err != nil {
		t.Fatal(err)
	}
	if n := a.Hashed(); n != 1 {
		t.Fatalf("PrepareFiles of one file read %d", n)
	}
	res, err := a.Prepare(ctx, PrepareOptions{Prepared: pr})
	if err != nil || res.Files != 4 || res.Prepared != pr {
		t.Fatalf("prepare: %+v, %v", res, err)
	}
	if n := a.Hashed(); n != 4 {
		t.Fatalf("PrepareFiles and Prepare read %d files to hash them, want 4 (each once)", n)
	}
	cr, err := a.Commit(ctx, CommitOptions{Prepared: res.Prepared})
	if err != nil || cr.Written != 4 {
		t.Fatalf("commit: %+v, %v", cr, err)
	}
	if n := a.Hashed(); n != 4 {
		t.Fatalf("the commit after the prepare read %d files to hash them, want none", n-4)
	}
	b := e.host("b")
	mustSync(t, b, SyncOptions{})
	if got := cacheFiles(t, b); len(got) != 4 || got["data/m/x/hinted"] != "by a hint" || len(got["data/m/y/large"]) != smallFile+10 {
		t.Fatalf("b has %d files: %q", len(got), got["data/m/x/hinted"])
	}

	// Without the Prepared, a commit reads what it commits.
	writeFile(t, a, "data/m/x/small", "small 2")
	if _, err := a.Prepare(ctx, PrepareOptions{}); err != nil {
		t.Fatal(err)
	}
	before := a.Hashed()
	if cr, err := a.Commit(ctx, CommitOptions{}); err != nil || cr.Written != 1 || a.Hashed() != before+1 {
		t.Fatalf("commit without the prepare's work: %+v, %v, read %d", cr, err, a.Hashed()-before)
	}
}

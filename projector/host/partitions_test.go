package host

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/internal/testmain"
)

// A commit of some partitions (CommitOptions.Partitions) publishes their
// changes and deletions only, and walks only the directories that can hold
// them: the rest of the cache stays uncommitted for the next commit, and none
// of its files is taken for a deletion.
func TestCommitPartitionsWalksOnlyTheirs(t *testing.T) {
	e := newEnv(t)
	var logged testmain.SyncBuffer
	h, err := Open(Config{Cache: t.TempDir(), Host: "a", Log: e.log, Blobs: e.blobs,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	files := []string{
		"data/t/id1/f.json",      // data--t--id1
		"data/t/id1/f-1/1/raw",   // data--t--id1
		"data/t/id1/n/latest",    // data--t--id1--n
		"data/t/id2/f.json",      // data--t--id2
		"data/t/x",               // data
		"workflow-runs/w/r.json", // workflow-runs--w
		"logs/l.txt",             // logs
		"top.txt",                // _root
	}
	for _, f := range files {
		writeFile(t, h, f, "v1 "+f)
	}
	mustCommit(t, h, "all")
	for _, f := range files {
		writeFile(t, h, f, "v2 "+f)
	}
	if err := os.Remove(filepath.Join(h.Dir().Root(), "data/t/id1/f-1/1/raw")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(h.Dir().Root(), "data/t/id2/f.json")); err != nil {
		t.Fatal(err)
	}
	// A symlink is warned of when the walk meets it: here, only if the walk
	// enters a directory no kept partition can be in.
	if err := os.Symlink("f.json", filepath.Join(h.Dir().Root(), "data/t/id2/link")); err != nil {
		t.Fatal(err)
	}
	before := len(logged.String())
	ctx := context.Background()
	res, err := h.Commit(ctx, CommitOptions{Message: "id1", Partitions: []string{"data--t--id1", "logs"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"data/t/id1/f-1/1/raw", "data/t/id1/f.json", "logs/l.txt"}, res.Paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if res.Written != 2 || res.Deleted != 1 {
		t.Errorf("written %d, deleted %d; want 2, 1", res.Written, res.Deleted)
	}
	if strings.Contains(logged.String()[before:], "link") {
		t.Errorf("the walk entered data/t/id2:\n%s", logged.String())
	}
	// The rest is still a change, the deletion in data--t--id2 included.
	before = len(logged.String())
	res = mustCommit(t, h, "rest")
	want := []string{"data/t/id1/n/latest", "data/t/id2/f.json", "data/t/x", "top.txt", "workflow-runs/w/r.json"}
	if diff := cmp.Diff(want, res.Paths); diff != "" {
		t.Errorf("second commit's paths (-want +got):\n%s", diff)
	}
	if !strings.Contains(logged.String()[before:], "link") {
		t.Errorf("a full commit does not warn of the symlink: the test cannot see a walk:\n%s", logged.String())
	}
}

package host

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/projector/ignore"
	"github.com/syncledger/syncledger/projector/statedb"
)

// TestCommitHold: a commit of more changed files than Config.CommitHold (40
// here; 131,072 by default), walking the cache or limited to named paths, is
// published as several commits of whole partitions, in partition order, each
// of at most an eighth of the hold's files — a partition of more files alone
// — sharing the message; a fresh host
// syncs to the same cache; the deletion of all of it is published the same
// way, its result listing the 3 paths asked for (CommitOptions.MaxPaths); and
// a commit afterwards publishes nothing.
func TestCommitHold(t *testing.T) {
	t.Parallel()
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("changed-named=%v", named), func(t *testing.T) {
			t.Parallel()
			testCommitHold(t, named)
		})
	}
}

// testCommitHold is TestCommitHold's case, the commits walking the cache or,
// named, limited to the changed paths (CommitOptions.Changed, as a watch's
// dirty set names them).
func testCommitHold(t *testing.T, named bool) {
	const hold, group = 40, 40 / 8
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	a.cfg.CommitHold = hold
	writeWide(t, a, 12, 2, "v1") // 12 partitions of 2 files
	for i := range 25 {          // one partition of 25
		writeFile(t, a, fmt.Sprintf("data/t/big/d/%d/raw", i), fmt.Sprint(i))
	}
	writeFile(t, a, "data/top.yaml", "the data partition") // shallow: partition "data"
	writeFile(t, a, "workflow-runs/w1/run.yaml", "a run")
	const total = 12*2 + 25 + 2

	checkLogged := func(from int, msg string, want int) []loggedCommit {
		t.Helper()
		logged := e.loggedCommits()[from:]
		seen := map[string]bool{}
		files := 0
		for i, c := range logged {
			if len(c.paths) > group && len(c.parts) > 1 {
				t.Errorf("commit %d holds %d files of %d partitions: more than a group's %d", i+1, len(c.paths), len(c.parts), group)
			}
			if wantMsg := fmt.Sprintf("%s (part %d of %d)", msg, i+1, len(logged)); c.message != wantMsg {
				t.Errorf("commit %d: message %q, want %q", i+1, c.message, wantMsg)
			}
			for _, p := range c.parts {
				if seen[p] {
					t.Errorf("partition %s split between commits", p)
				}
				seen[p] = true
			}
			files += len(c.paths)
		}
		if files != want || len(logged) < 2 {
			t.Fatalf("%d commits of %d files, want %d files in several", len(logged), files, want)
		}
		return logged
	}

	var changed []string
	commit := func(msg string, maxPaths int) CommitResult {
		t.Helper()
		res, err := a.Commit(context.Background(), CommitOptions{Message: msg, Changed: changed, MaxPaths: maxPaths})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if named {
		changed = slices.Collect(maps.Keys(cacheFiles(t, a)))
	}
	puts := &atomic.Int64{}
	a.cfg.Blobs = a.cfg.Blobs.View(func(d driver.Bucket) driver.Bucket { return countedBlobs{d, puts} })
	res := commit("cold", 0)
	// Each file's content is new and stored once: what the scan staged
	// before it stopped holding is not stored again by the groups' commits.
	if n := puts.Load(); n != total {
		t.Errorf("the commit stored %d blobs, want %d (one a file)", n, total)
	}
	if res.Written != total || res.Deleted != 0 || len(res.Paths) != total || !slices.IsSorted(res.Paths) {
		t.Fatalf("commit wrote %d, deleted %d, %d paths; want %d written", res.Written, res.Deleted, len(res.Paths), total)
	}
	logged := checkLogged(0, "cold", total)
	if len(res.Commits) != len(logged) || res.Commit != logged[len(logged)-1].id {
		t.Fatalf("result: %d commits, last %s; the log: %d", len(res.Commits), res.Commit, len(logged))
	}
	if !slices.ContainsFunc(logged, func(c loggedCommit) bool { return len(c.parts) == 1 && len(c.paths) == 25 }) {
		t.Errorf("the partition of 25 files is not a commit of its own")
	}
	if !slices.ContainsFunc(logged, func(c loggedCommit) bool { return len(c.parts) == 2 && len(c.paths) == 4 }) {
		t.Errorf("no commit of two partitions of 2 files: the groups do not fill up to %d files", group)
	}
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ (-a +b):\n%s", diff)
	}
	if again := mustCommit(t, a, "again"); !again.Nothing {
		t.Fatalf("commit after the held commit: %+v, want nothing", again)
	}

	// One deletion among many new files: the groups of the partitions
	// without deletions look for none; the one with it publishes it.
	if err := os.Remove(filepath.Join(a.Dir().Root(), filepath.FromSlash(wideFile(3, 1)))); err != nil {
		t.Fatal(err)
	}
	for i := range 45 {
		writeFile(t, a, fmt.Sprintf("data/t/n%02d/d/%d/raw", i%15, i), "new "+fmt.Sprint(i))
	}
	if named {
		changed = append(changed, wideFile(3, 1))
		for p := range cacheFiles(t, a) {
			if strings.HasPrefix(p, "data/t/n") {
				changed = append(changed, p)
			}
		}
	}
	if res := commit("mixed", 0); res.Deleted != 1 || res.Written != 45 || len(res.Commits) < 2 {
		t.Fatalf("commit wrote %d, deleted %d in %d commits; want 45 and 1 in several", res.Written, res.Deleted, len(res.Commits))
	}
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ (-a +b):\n%s", diff)
	}
	const total2 = total - 1 + 45

	// Delete everything.
	n := len(e.loggedCommits())
	for _, dir := range []string{"data", "workflow-runs"} {
		if err := os.RemoveAll(filepath.Join(a.Dir().Root(), dir)); err != nil {
			t.Fatal(err)
		}
	}
	res = commit("gone", 3) // as the CLI asks for the paths it prints
	if res.Deleted != total2 || res.Written != 0 || len(res.Paths) != 3 || !slices.IsSorted(res.Paths) {
		t.Fatalf("commit deleted %d, wrote %d, listed %d paths; want %d deleted, 3 paths listed", res.Deleted, res.Written, len(res.Paths), total2)
	}
	checkLogged(n, "gone", total2)
	mustSync(t, b, SyncOptions{})
	if got := cacheFiles(t, b); len(got) != 0 {
		t.Fatalf("b holds %d files after the deletion", len(got))
	}
	if again := mustCommit(t, a, "again"); !again.Nothing {
		t.Fatalf("commit after the deletion: %+v, want nothing", again)
	}
}

// countedBlobs counts the blob puts asked of a bucket's batches: each asks
// the driver's batch first whether the blob is stored (a file driver prefers
// no put to the question, and the tests retry nothing), so the batches'
// stats count them.
type countedBlobs struct {
	driver.Bucket
	puts *atomic.Int64
}

func (c countedBlobs) NewBatch() driver.Batch { return countedBatch{c.Bucket.NewBatch(), c.puts} }

type countedBatch struct {
	driver.Batch
	puts *atomic.Int64
}

func (b countedBatch) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	b.puts.Add(1)
	return b.Batch.Stat(ctx, key)
}

// TestHoldGroups: groups of whole partitions in order, at most maxParts and
// hold files each, a larger partition alone.
func TestHoldGroups(t *testing.T) {
	got := holdGroups(map[string]int{"a": 3, "b": 3, "c": 5, "d": 20, "e": 1, "f": 1, "g": 1}, 2, 6)
	want := [][]string{{"a", "b"}, {"c"}, {"d"}, {"e", "f"}, {"g"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("groups (-want +got):\n%s", diff)
	}
}

// TestWalkTrackMatchesSeenSet: the deletions a walk finds with walkTrack —
// each directory's rows compared as the walk leaves it — are those the seen
// set of a scan of named paths finds (the whole index read, every path the
// walk saw held), over random trees and random damage: removed files and
// directories, files turned into directories and back, empty directories,
// symlinks in place of directories, ignore rules, names that sort between a
// directory and its files ("a-b", "a.b", "a0" beside "a/"), with and without
// a partition filter.
func TestWalkTrackMatchesSeenSet(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	t.Parallel()
	ctx := context.Background()
	names := []string{"a", "a-b", "a.b", "a0", "b", "z"}
	var deletions, unsynced atomic.Int64 // the damage the seeds did, found
	t.Cleanup(func() {
		if deletions.Load() == 0 || unsynced.Load() == 0 {
			t.Errorf("the seeds found %d deletions and %d unsynced paths: the damage does not reach what is tested", deletions.Load(), unsynced.Load())
		}
	})
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 29))
			e := newEnv(t)
			h := e.host("a")
			root := h.Dir().Root()
			randPath := func() string {
				var segs []string
				if rng.IntN(2) == 0 {
					segs = append(segs, "data", "t")
				}
				for range 1 + rng.IntN(4) {
					segs = append(segs, names[rng.IntN(len(names))])
				}
				return strings.Join(segs, "/")
			}
			var files []string
			for range 60 {
				p := randPath()
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
					continue // a file where a directory would go
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(p), 0o644); err != nil {
					continue // a directory of that name
				}
				files = append(files, p)
			}
			mustCommit(t, h, "base")
			for range 12 {
				p := files[rng.IntN(len(files))]
				abs := filepath.Join(root, p)
				op := rng.IntN(7)
				if !strings.Contains(p, "/") && op >= 1 && op <= 5 {
					op = 0 // its directory is the cache's root
				}
				switch op {
				case 0:
					os.Remove(abs)
				case 1:
					os.RemoveAll(filepath.Dir(abs))
				case 2: // a file becomes a directory
					os.Remove(abs)
					os.MkdirAll(abs, 0o755)
					os.WriteFile(filepath.Join(abs, "in"), []byte("in"), 0o644)
				case 3: // a directory becomes a file
					os.RemoveAll(filepath.Dir(abs))
					os.WriteFile(filepath.Dir(abs), []byte("was a dir"), 0o644)
				case 4: // an empty directory stays
					os.RemoveAll(filepath.Dir(abs))
					os.MkdirAll(filepath.Dir(abs), 0o755)
				case 5: // a symlink in place of a directory
					os.RemoveAll(filepath.Dir(abs))
					os.Symlink(t.TempDir(), filepath.Dir(abs))
				case 6:
					os.WriteFile(abs, []byte("changed"), 0o644)
				}
			}
			if rng.IntN(3) == 0 {
				os.WriteFile(filepath.Join(root, ignore.FileName), []byte(names[rng.IntN(len(names))]+"/\n"), 0o644)
			}
			// Every top-level name, on disk or in the index: a scan of
			// these paths is a scan of the whole cache by the seen set.
			top := map[string]bool{}
			des, _ := os.ReadDir(root)
			for _, de := range des {
				top[de.Name()] = true
			}
			if err := h.db.ForEachPrefix("", func(p string, _ statedb.Entry) (bool, error) {
				first, _, _ := strings.Cut(p, "/")
				top[first] = true
				return true, nil
			}); err != nil {
				t.Fatal(err)
			}
			release, err := h.acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			s, err := h.load(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			var filters [][]string
			filters = append(filters, nil)
			for _, f := range files[:3] {
				filters = append(filters, []string{ledger.PartitionKey(f)})
			}
			for _, f := range filters {
				parts := partitionFilter(f)
				walked, err := h.scan(s, parts, nil, nil, scanBound{})
				if err != nil {
					t.Fatal(err)
				}
				named, err := h.scan(s, parts, slices.Sorted(maps.Keys(top)), nil, scanBound{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range walked.changes {
					if c.Deleted {
						deletions.Add(1)
					}
				}
				unsynced.Add(int64(len(walked.unsynced)))
				if diff := cmp.Diff(named.changes, walked.changes); diff != "" {
					t.Errorf("partitions %v: changes (-seen set +walkTrack):\n%s", f, diff)
				}
				// A partition filter keeps the walk out of directories a scan
				// of named paths enters: only the whole walk sees as much.
				if diff := cmp.Diff(named.unsynced, walked.unsynced); f == nil && diff != "" {
					t.Errorf("partitions %v: unsynced (-seen set +walkTrack):\n%s", f, diff)
				}
			}
		})
	}
}

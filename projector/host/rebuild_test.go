package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/maintain"
	"github.com/syncledger/syncledger/projector/snapshot"
	"github.com/syncledger/syncledger/projector/statedb"
)

// The determinism workload's size. go test ./... plays 500 commits over 60
// partitions (about 2 s): the same steps, snapshots at the same quarters, the
// same subtests. The acceptance size (≥ 2,000 commits over ≥ 50 partitions,
// about 6 s) runs in .ci/run:
//
//	go test ./projector/host -run '^TestRebuildDeterminism$' -v -rebuild.commits=2000
//
// A longer soak: -rebuild.commits=10000 -rebuild.partitions=200.
var (
	rebuildCommits    = flag.Int("rebuild.commits", 500, "commits of TestRebuildDeterminism's workload")
	rebuildPartitions = flag.Int("rebuild.partitions", 60, "partitions of TestRebuildDeterminism's workload")
	rebuildSeed       = flag.Uint64("rebuild.seed", 0, "seed of TestRebuildDeterminism's workload (0: from the clock)")
)

// hostImage is everything a cache holds that must be identical between a host
// that synced live and a rebuilt one: files (content and mode), the persisted
// lineage, HWM and marks, and the index rows without their mtimes.
type hostImage struct {
	Files map[string]string // path → "mode sha256"
	State statedb.State
	Index map[string]statedb.Entry
}

func imageOf(t *testing.T, h *Host) hostImage {
	t.Helper()
	img := hostImage{Files: treeOf(t, h.Dir().Root()), Index: map[string]statedb.Entry{}}
	err := h.View(func(db *statedb.DB) error {
		st, err := db.Load()
		if err != nil {
			return err
		}
		img.State = st
		return db.ForEach(func(p string, e statedb.Entry) error {
			e.MTime = time.Time{}
			img.Index[p] = e
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// treeOf returns every file under root (outside .syncledger) as "mode sha256".
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ledger.StateDir {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%o %x", fi.Mode().Perm(), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameImage(t *testing.T, what string, got, want hostImage) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s differs from the live host (-live +%s):\n%s", what, what, diff)
	}
}

// workload drives random commits from several hosts: writes, overwrites, mode
// changes and deletions over many partitions, with multi-partition commits.
type workload struct {
	t     *testing.T
	rnd   *rand.Rand
	hosts []*Host
	parts int
	n     int
}

func (w *workload) step() {
	t := w.t
	h := w.hosts[w.rnd.IntN(len(w.hosts))]
	mustSync(t, h, SyncOptions{})
	root := h.Dir().Root()
	k := 1 + w.rnd.IntN(3)
	var changed []string
	for range k {
		dir := fmt.Sprintf("data/t/m%03d/f", w.rnd.IntN(w.parts))
		ents, _ := os.ReadDir(filepath.Join(root, dir))
		switch op := w.rnd.IntN(10); {
		case op < 2 && len(ents) > 0: // delete
			name := ents[w.rnd.IntN(len(ents))].Name()
			os.Remove(filepath.Join(root, dir, name))
			changed = append(changed, dir+"/"+name)
		case op < 3 && len(ents) > 0: // mode change
			name := ents[w.rnd.IntN(len(ents))].Name()
			os.Chmod(filepath.Join(root, dir, name), []os.FileMode{0o600, 0o644, 0o640, 0o755}[w.rnd.IntN(4)])
			changed = append(changed, dir+"/"+name)
		case op < 6 && len(ents) > 0: // overwrite
			name := ents[w.rnd.IntN(len(ents))].Name()
			os.WriteFile(filepath.Join(root, dir, name), fmt.Appendf(nil, "v%d %d", w.n, w.rnd.Uint64()), 0o644)
			changed = append(changed, dir+"/"+name)
		default: // new file; some are raw (lazy-skippable), some share content
			name := fmt.Sprintf("f%d", w.rnd.IntN(12))
			if w.rnd.IntN(5) == 0 {
				name = "raw"
			}
			body := fmt.Sprintf("%s in %s at %d", name, dir, w.n)
			if w.rnd.IntN(4) == 0 {
				body = "shared content"
			}
			writeFile(t, h, dir+"/"+name, body)
			changed = append(changed, dir+"/"+name)
		}
	}
	// Every tenth commit scans the whole cache; the others name the paths the
	// step touched, as a dirty set does (CommitOptions.Changed): the scans of
	// a growing cache were a third of the workload's time.
	slices.Sort(changed)
	opt := CommitOptions{Message: fmt.Sprint("step ", w.n), Changed: changed}
	if w.n%10 == 0 {
		opt.Changed = nil
	}
	if _, err := h.Commit(context.Background(), opt); err != nil {
		t.Fatalf("commit %d: %v", w.n, err)
	}
	w.n++
}

func (e *env) freshHost(name string) *Host {
	e.t.Helper()
	h := e.host(name)
	return h
}

func (e *env) snapCfg() snapshot.Config {
	return snapshot.Config{Log: e.log, Blobs: e.blobs, Objects: e.blobs}
}

func mustTake(t *testing.T, e *env) snapshot.TakeResult {
	t.Helper()
	r, err := snapshot.Take(context.Background(), e.snapCfg(), snapshot.TakeOptions{})
	if err != nil {
		t.Fatalf("take snapshot: %v", err)
	}
	return r
}

func mustRebuild(t *testing.T, h *Host, opt RebuildOptions) RebuildResult {
	t.Helper()
	r, err := h.Rebuild(context.Background(), opt)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	return r
}

// TestRebuildDeterminism is the acceptance test of snapshots, rebuild, retention,
// replay and GC on one random workload from three hosts.
func TestRebuildDeterminism(t *testing.T) {
	t.Parallel()
	seed := *rebuildSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -rebuild.seed=%d)", seed, seed)
	ctx := context.Background()
	e := newEnv(t)
	w := &workload{t: t, rnd: rand.New(rand.NewPCG(seed, 1)), parts: *rebuildPartitions,
		hosts: []*Host{e.host("a"), e.host("b"), e.host("c")}}
	live := e.host("live")
	stale := e.host("stale")

	type capture struct {
		seq  ledger.Seq
		tree map[string]string
	}
	var captures []capture
	var snaps []snapshot.TakeResult
	start := time.Now()
	for i := range *rebuildCommits {
		w.step()
		switch {
		case i == *rebuildCommits/5:
			mustSync(t, stale, SyncOptions{}) // left behind from here on
		case i%(*rebuildCommits/4) == *rebuildCommits/4-1:
			snaps = append(snaps, mustTake(t, e))
		}
		// Random capture points, and always one halfway: with about 1 in 84
		// commits drawn, 1 seed in 400 drew none and the replay had nothing to
		// compare (seed 1796600015805568682).
		if w.rnd.IntN(*rebuildCommits/6+1) == 0 || i == *rebuildCommits/2 {
			r := mustSync(t, live, SyncOptions{})
			captures = append(captures, capture{r.HWM, treeOf(t, live.Dir().Root())})
		}
	}
	t.Logf("workload: %d commits over %d partitions in %v", w.n, w.parts, time.Since(start))
	head, _ := e.log.LastSeq(ctx)
	mustSync(t, live, SyncOptions{})
	want := imageOf(t, live)
	if want.State.HWM != head || len(want.State.Marks) < w.parts*9/10 {
		t.Fatalf("live host: hwm %d (head %d), %d partitions", want.State.HWM, head, len(want.State.Marks))
	}
	for _, h := range w.hosts {
		mustSync(t, h, SyncOptions{})
		sameImage(t, "writer "+h.cfg.Host, imageOf(t, h), want)
	}

	// (a) the log alone.
	t.Run("stream-only", func(t *testing.T) {
		h := e.freshHost("fresh-a")
		r := mustRebuild(t, h, RebuildOptions{NoSnapshot: true})
		if r.Snapshot != 0 || r.HWM != head {
			t.Fatalf("%+v", r)
		}
		sameImage(t, "stream-only rebuild", imageOf(t, h), want)
	})
	// (b) the newest snapshot plus the log after it.
	newest := snaps[len(snaps)-1]
	t.Run("snapshot-and-stream", func(t *testing.T) {
		h := e.freshHost("fresh-b")
		r := mustRebuild(t, h, RebuildOptions{})
		if r.Snapshot != newest.Info.Seq || r.Replay.Events != int(head-newest.Info.Seq) {
			t.Fatalf("rebuild used snapshot %d and replayed %d events; want snapshot %d and %d events", r.Snapshot, r.Replay.Events, newest.Info.Seq, head-newest.Info.Seq)
		}
		sameImage(t, "snapshot rebuild", imageOf(t, h), want)
		// A snapshot built from the log alone is the same bytes.
		full, err := snapshot.Take(ctx, e.snapCfg(), snapshot.TakeOptions{Full: true})
		if err != nil {
			t.Fatal(err)
		}
		if !full.UpToDate && full.Info.Seq == head {
			inc, err := snapshot.Build(ctx, snapshot.BuildConfig{Log: e.log, Blobs: e.blobs, Base: mustGet(t, e, newest.Info)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(mustGet(t, e, full.Info), inc); diff != "" {
				t.Fatalf("incremental and full snapshots differ:\n%s", diff)
			}
		}
	})
	// Time travel, before retention drops the early events.
	t.Run("replay", func(t *testing.T) {
		if len(captures) > 5 {
			captures = captures[len(captures)-5:]
		}
		for i, c := range captures {
			dir := filepath.Join(t.TempDir(), "tree")
			r, err := Replay(ctx, ReplayConfig{Log: e.log, Blobs: e.blobs, Into: dir, To: c.seq})
			if err != nil {
				t.Fatalf("replay --to %d: %v", c.seq, err)
			}
			if r.Seq != c.seq {
				t.Fatalf("replay --to %d ended at %d", c.seq, r.Seq)
			}
			if diff := cmp.Diff(c.tree, treeOf(t, dir)); diff != "" {
				t.Fatalf("replay --to %d differs from the live tree then (-live +replay):\n%s", c.seq, diff)
			}
			if i == 0 { // one partition only
				p := "data--t--m001--f"
				dir := filepath.Join(t.TempDir(), "model")
				if _, err := Replay(ctx, ReplayConfig{Log: e.log, Blobs: e.blobs, Into: dir, To: c.seq, Partitions: []string{p}}); err != nil {
					t.Fatal(err)
				}
				wantModel := map[string]string{}
				for k, v := range c.tree {
					if ledger.PartitionKey(k) == p {
						wantModel[k] = v
					}
				}
				if diff := cmp.Diff(wantModel, treeOf(t, dir)); diff != "" {
					t.Fatalf("replay --to %d --partition %s:\n%s", c.seq, p, diff)
				}
			}
		}
		if len(captures) == 0 {
			t.Fatal("no capture")
		}
	})

	// Retention: keep the previous snapshot usable.
	margin := uint64(newest.Info.Seq - snaps[len(snaps)-2].Info.Seq)
	rr, err := maintain.Retain(ctx, e.snapCfg(), margin)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Dropped == 0 || rr.Before != snaps[len(snaps)-2].Info.Seq+1 {
		t.Fatalf("retain: %+v", rr)
	}
	// (c) after retention dropped the early events.
	t.Run("after-retention", func(t *testing.T) {
		h := e.freshHost("fresh-c")
		sameImage(t, "rebuild after retention", imageOf(t, rebuilt(t, h, newest.Info.Seq)), want)
		_, err := e.freshHost("fresh-c2").Rebuild(ctx, RebuildOptions{NoSnapshot: true})
		if !errors.Is(err, ledger.ErrTruncated) {
			t.Fatalf("stream-only rebuild after retention: %v, want ErrTruncated", err)
		}
		st := mustStatus(t, live)
		if st.Snapshot != newest.Info.Seq || st.First <= 1 || st.First > rr.Before {
			t.Fatalf("status: snapshot %d, first %d", st.Snapshot, st.First)
		}
	})
	// A host whose HWM the log no longer holds events after: sync falls back.
	t.Run("sync-falls-back", func(t *testing.T) {
		res, err := stale.Sync(ctx, SyncOptions{})
		if err != nil || !res.Rebuilt {
			t.Fatalf("stale sync: %+v, %v", res, err)
		}
		sameImage(t, "stale host after sync", imageOf(t, stale), want)
	})
	// A corrupt newest snapshot: flipped byte, then truncated: the previous one is used.
	t.Run("corrupt-newest", func(t *testing.T) {
		key := newest.Info.Key
		orig := readObject(t, e, key)
		flipped := bytes.Clone(orig)
		for i := len(flipped) / 2; ; i++ { // a flip that the format notices (most do)
			flipped[i] ^= 0x40
			if _, err := snapshot.Decode(bytes.NewReader(flipped)); err != nil {
				break
			}
			flipped[i] ^= 0x40
		}
		for name, b := range map[string][]byte{"flipped": flipped, "truncated": orig[:len(orig)*2/3]} {
			putObject(t, e, key, b)
			h := e.freshHost("fresh-" + name)
			r := mustRebuild(t, h, RebuildOptions{})
			if r.Snapshot != snaps[len(snaps)-2].Info.Seq || len(r.Skipped) != 1 {
				t.Fatalf("%s: rebuild used snapshot %d, skipped %v", name, r.Snapshot, r.Skipped)
			}
			sameImage(t, name+" fallback rebuild", imageOf(t, h), want)
		}
		putObject(t, e, key, orig)
	})
	t.Run("gc", func(t *testing.T) { testGC(t, e, e.dir, w, live, want) })
}

func rebuilt(t *testing.T, h *Host, wantSnap ledger.Seq) *Host {
	t.Helper()
	if r := mustRebuild(t, h, RebuildOptions{}); r.Snapshot != wantSnap {
		t.Fatalf("rebuild used snapshot %d, want %d", r.Snapshot, wantSnap)
	}
	return h
}

func mustGet(t *testing.T, e *env, info snapshot.Info) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Get(context.Background(), e.blobs, info)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readObject(t *testing.T, e *env, key string) []byte {
	t.Helper()
	rc, err := e.blobs.GetObject(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putObject(t *testing.T, e *env, key string, b []byte) {
	t.Helper()
	if err := e.blobs.PutObject(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

// testGC runs GC with a commit in flight (its blob uploaded, its event not yet
// published) and every other blob older than the grace period, then checks that
// every host still syncs, a new host rebuilds, and all verify clean.
func testGC(t *testing.T, e *env, dir string, w *workload, live *Host, want hostImage) {
	ctx := context.Background()
	// Age every stored blob past the grace period.
	old := time.Now().Add(-3 * time.Hour)
	blobDir := filepath.Join(dir, filepath.FromSlash(ledger.BlobPrefix))
	filepath.WalkDir(blobDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	// Content whose blob is garbage (referenced by nothing any more, and old):
	// the in-flight commit sets a file back to it.
	pre, err := maintain.GC(ctx, e.snapCfg(), maintain.GCOptions{Grace: time.Hour, DryRun: true})
	if err != nil || len(pre.Deleted) == 0 {
		t.Fatalf("gc dry run before the commit: %+v %v; want garbage to reuse", pre, err)
	}
	reused, _ := ledger.ParseDigest(pre.Deleted[0])
	reusedContent, err := ledger.ReadBlob(ctx, e.blobs, reused)
	if err != nil {
		t.Fatal(err)
	}
	// A commit in flight: stopped after its upload, before its append.
	writer := w.hosts[0]
	mustSync(t, writer, SyncOptions{})
	writeFile(t, writer, "data/t/m000/f/inflight", "in flight during gc")
	writeFile(t, writer, "data/t/m000/f/reverted", string(reusedContent))
	inflight := ledger.DigestOf([]byte("in flight during gc"))
	uploaded, release := make(chan struct{}), make(chan struct{})
	plain := writer.cfg.Log
	writer.cfg.Log = &hookedLog{CommitLog: plain, beforeAppend: func() { // its blobs are stored
		close(uploaded)
		<-release
	}}
	done := make(chan error)
	go func() {
		_, err := writer.Commit(ctx, CommitOptions{Message: "in flight"})
		done <- err
	}()
	<-uploaded
	res, err := maintain.GC(ctx, e.snapCfg(), maintain.GCOptions{Grace: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	dry := res
	res, err = maintain.GC(ctx, e.snapCfg(), maintain.GCOptions{Grace: time.Hour})
	close(release)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("in-flight commit: %v", err)
	}
	writer.cfg.Log = plain
	t.Logf("gc: %d blobs, %d referenced, %d young, %d deleted (%d bytes); snapshots deleted %v",
		res.Blobs, res.Referenced, res.Young, len(res.Deleted), res.Bytes, res.DeletedSnapshots)
	if len(res.Deleted) == 0 || res.Young != 2 || !slices.Equal(dry.Deleted, res.Deleted) {
		t.Fatalf("gc deleted %d blobs (dry run: %d), kept %d young: want some deleted, the in-flight commit's two blobs kept", len(res.Deleted), len(dry.Deleted), res.Young)
	}
	if slices.Contains(res.Deleted, inflight.String()) {
		t.Fatal("gc deleted the in-flight commit's blob")
	}
	if slices.Contains(res.Deleted, reused.String()) {
		t.Fatal("gc deleted the garbage blob the in-flight commit reuses")
	}
	// Everyone syncs, a new host rebuilds; all verify clean and agree.
	var ref hostImage
	for i, h := range append(slices.Clone(w.hosts), live, e.freshHost("after-gc")) {
		if _, err := h.Sync(ctx, SyncOptions{}); err != nil {
			t.Fatalf("sync %s after gc: %v", h.cfg.Host, err)
		}
		if v, err := h.Verify(ctx); err != nil || !v.OK() {
			t.Fatalf("verify %s after gc: %+v %v", h.cfg.Host, v, err)
		}
		if i == 0 {
			ref = imageOf(t, h)
			if _, ok := ref.Files["data/t/m000/f/inflight"]; !ok {
				t.Fatal("in-flight file not in the ledger")
			}
			if f := ref.Files["data/t/m000/f/reverted"]; !strings.HasSuffix(f, " "+reused.String()) {
				t.Fatalf("reverted file in the cache: %q, want content %s", f, reused)
			}
			continue
		}
		sameImage(t, "host "+h.cfg.Host+" after gc", imageOf(t, h), ref)
	}
	// A rebuild from the older (fallback) snapshot still finds its blobs.
	infos, _ := snapshot.List(ctx, e.blobs, want.State.Ledger)
	if len(infos) < 2 {
		t.Fatalf("gc left %d snapshots; the fallback one must stay", len(infos))
	}
	h := e.freshHost("after-gc-fallback")
	putObject(t, e, infos[0].Key, []byte("garbage"))
	if _, err := h.Rebuild(ctx, RebuildOptions{}); err != nil {
		t.Fatalf("rebuild from the fallback snapshot after gc: %v", err)
	}
	sameImage(t, "fallback rebuild after gc", imageOf(t, h), ref)
}

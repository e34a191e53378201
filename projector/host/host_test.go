package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// env is one ledger with a file blob store: on the in-memory twin
// (newEnv), or on a nats-server process where the adapter is the subject
// (newNATSEnv).
type env struct {
	t     *testing.T
	nc    *nats.Conn     // newNATSEnv only
	mem   *memledger.Log // newEnv only
	log   ledger.CommitLog
	uuid  string
	objs  driver.Bucket
	blobs *ledger.Bucket
	dir   string // the file object store's directory
}

// corruptBlob flips a byte of a stored blob behind the blob store's back.
func (e *env) corruptBlob(d ledger.Digest) {
	e.t.Helper()
	b, err := ledger.ReadBlob(context.Background(), e.blobs, d)
	if err != nil {
		e.t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := e.blobs.PutObject(context.Background(), ledger.BlobKey(d), bytes.NewReader(b), int64(len(b))); err != nil {
		e.t.Fatal(err)
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	lg, err := memledger.New(ledger.Info{Name: "test", Blobs: "file:///unused"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return withBlobs(t, &env{t: t, mem: lg, log: lg, uuid: lg.UUID()})
}

// newNATSEnv is newEnv on a nats-server process, for the tests whose subject
// is the JetStream adapter's behaviour under a host (its answers from opening,
// a server that restarts).
func newNATSEnv(t *testing.T) *env {
	t.Helper()
	_, nc := natsjstest.RunServer(t)
	lg, err := natsjs.CreateLog(context.Background(), nc, natsjs.LedgerConfig{Name: "test", Blobs: "file:///unused"})
	if err != nil {
		t.Fatal(err)
	}
	return withBlobs(t, &env{t: t, nc: nc, log: lg, uuid: lg.UUID()})
}

// hookedLog calls beforeAppend (if set) before each Append: a commit
// stopped after its content is stored and before it is published.
type hookedLog struct {
	ledger.CommitLog
	beforeAppend func()
}

func (l *hookedLog) Append(ctx context.Context, evs []ledger.Event, fences ...ledger.Fence) ([]ledger.Seq, error) {
	if l.beforeAppend != nil {
		l.beforeAppend()
	}
	return l.CommitLog.Append(ctx, evs, fences...)
}

// withBlobs gives e a file blob store in a new directory.
func withBlobs(t *testing.T, e *env) *env {
	t.Helper()
	e.dir = t.TempDir()
	objs, err := fileblob.New(fileblob.Config{Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	e.objs, e.blobs = objs, ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	return e
}

func (e *env) host(name string) *Host {
	e.t.Helper()
	return e.hostAt(name, e.t.TempDir())
}

func (e *env) hostAt(name, dir string) *Host {
	e.t.Helper()
	h, err := Open(Config{Cache: dir, Host: name, Log: e.log, Blobs: e.blobs})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Close() })
	return h
}

func writeFile(t *testing.T, h *Host, rel, content string) {
	t.Helper()
	p := filepath.Join(h.Dir().Root(), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, h *Host, rel string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir().Root(), filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func mustCommit(t *testing.T, h *Host, msg string) CommitResult {
	t.Helper()
	res, err := h.Commit(context.Background(), CommitOptions{Message: msg})
	if err != nil {
		t.Fatalf("commit %q: %v", msg, err)
	}
	return res
}

func mustSync(t *testing.T, h *Host, opt SyncOptions) SyncResult {
	t.Helper()
	res, err := h.Sync(context.Background(), opt)
	if err != nil {
		t.Fatalf("sync %+v: %v", opt.Partitions, err)
	}
	return res
}

func mustStatus(t *testing.T, h *Host) Status {
	t.Helper()
	st, err := h.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// cacheFiles returns every synced file of a cache with its content.
func cacheFiles(t *testing.T, h *Host) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := h.Dir().Root()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ledger.StateDir {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

const (
	vpcRaw      = "data/command/shell/vpc/result/1/raw"
	vpcMeta     = "data/command/shell/vpc/result/1/metadata.yaml"
	consumerRaw = "data/command/shell/consumer/result/1/raw"
)

// TestSeedScenario is swamp-club#3193 through the library: a scoped sync and a
// no-op commit must not make the host believe it holds commits it never read.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	for _, ownCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("own-commit=%v", ownCommit), func(t *testing.T) {
			e := newEnv(t)
			control, writer := e.host("control"), e.host("writer")
			mustSync(t, control, SyncOptions{})

			writeFile(t, writer, vpcRaw, "vpc-id: vpc-123")
			writeFile(t, writer, vpcMeta, "version: 1")
			mustCommit(t, writer, "run vpc")
			writeFile(t, writer, consumerRaw, "consumer saw vpc-123")
			mustCommit(t, writer, "run consumer")

			consumerParts := ledger.PartitionKeysForModel("command/shell", "consumer")
			res := mustSync(t, control, SyncOptions{Partitions: consumerParts})
			if res.Written != 1 {
				t.Fatalf("scoped sync wrote %d files, want 1", res.Written)
			}
			if ownCommit {
				writeFile(t, control, "data/command/shell/consumer/result/2/raw", "control's run")
				if r := mustCommit(t, control, "control run"); r.Nothing {
					t.Fatal("control's change not committed")
				}
			} else if r := mustCommit(t, control, "no-op"); !r.Nothing {
				t.Fatalf("no-op commit published %+v", r)
			}
			st := mustStatus(t, control)
			if st.HWM >= st.Head {
				t.Fatalf("after a scoped sync: hwm %d, head %d: the host claims commits it never read", st.HWM, st.Head)
			}
			if _, ok := readFile(t, control, vpcRaw); ok {
				t.Fatal("vpc present before a full sync?")
			}
			res = mustSync(t, control, SyncOptions{})
			if got, _ := readFile(t, control, vpcRaw); got != "vpc-id: vpc-123" {
				t.Fatalf("full sync did not pull vpc: %q (%+v)", got, res)
			}
			st = mustStatus(t, control)
			if st.HWM != st.Head || st.Behind != 0 {
				t.Fatalf("after a full sync: hwm %d head %d", st.HWM, st.Head)
			}
			mustSync(t, writer, SyncOptions{})
			if diff := cmp.Diff(cacheFiles(t, writer), cacheFiles(t, control)); diff != "" {
				t.Fatalf("caches differ (-writer +control):\n%s", diff)
			}
		})
	}
}

func TestFastPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.host("a")
	writeFile(t, a, "audit/1.jsonl", "x")
	mustCommit(t, a, "")
	res := mustSync(t, a, SyncOptions{})
	if !res.UpToDate || res.HWM != 1 {
		t.Fatalf("own commit at HWM+1 should leave the host up to date: %+v", res)
	}
	if r := mustSync(t, a, SyncOptions{Partitions: []string{"audit"}}); !r.UpToDate {
		t.Fatalf("scoped fast path: %+v", r)
	}
	if r := mustCommit(t, a, ""); !r.Nothing {
		t.Fatalf("nothing to commit: %+v", r)
	}
	if last, _ := e.log.LastSeq(context.Background()); last != 1 {
		t.Fatalf("no-op commit published: last seq %d", last)
	}
}

func TestDeleteAndOverwrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "audit/x", "1")
	writeFile(t, a, "audit/y", "1")
	writeFile(t, a, "files/big", strings.Repeat("z", 1<<20))
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	os.Remove(filepath.Join(a.Dir().Root(), "audit/x"))
	writeFile(t, a, "audit/y", "2")
	os.Chmod(filepath.Join(a.Dir().Root(), "files/big"), 0o600)
	r := mustCommit(t, a, "")
	if r.Deleted != 1 || r.Written != 2 {
		t.Fatalf("commit %+v, want 1 deletion and 2 writes (content, mode)", r)
	}
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ:\n%s", diff)
	}
	fi, _ := os.Stat(filepath.Join(b.Dir().Root(), "files/big"))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v not synced", fi.Mode())
	}
	if v, err := b.Verify(context.Background()); err != nil || !v.OK() {
		t.Fatalf("verify %+v %v", v, err)
	}
}

func TestLocalChangesNeverOverwritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "audit/x", "1")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	writeFile(t, a, "audit/x", "from a")
	mustCommit(t, a, "")
	writeFile(t, b, "audit/x", "from b, uncommitted")
	_, err := b.Sync(context.Background(), SyncOptions{})
	var lc *LocalChangesError
	if !errors.As(err, &lc) || lc.Paths[0] != "audit/x" {
		t.Fatalf("sync over a local change: %v", err)
	}
	if got, _ := readFile(t, b, "audit/x"); got != "from b, uncommitted" {
		t.Fatalf("local change lost: %q", got)
	}
	// Committing it conflicts (same path changed remotely): exit with the path, keep the file.
	_, err = b.Commit(context.Background(), CommitOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Paths) != 1 || ce.Paths[0] != "audit/x" {
		t.Fatalf("commit of a conflicting change: %v", err)
	}
	if got, _ := readFile(t, b, "audit/x"); got != "from b, uncommitted" {
		t.Fatalf("local change lost: %q", got)
	}
	if st := mustStatus(t, b); len(st.Dirty) != 1 {
		t.Fatalf("conflicting file not dirty: %+v", st.Dirty)
	}
}

func TestConflictRetryWhenPathsDiffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "audit/a", "1")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	writeFile(t, a, "audit/a", "2")
	mustCommit(t, a, "")
	writeFile(t, b, "audit/b", "b")
	r := mustCommit(t, b, "")
	if r.Attempts != 2 || r.Pulled != 1 {
		t.Fatalf("commit after a remote change to another path: %+v", r)
	}
	mustSync(t, a, SyncOptions{})
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ:\n%s", diff)
	}
	sa, sb := mustStatus(t, a), mustStatus(t, b)
	if sa.HWM != sa.Head || sb.HWM != sb.Head {
		t.Fatalf("hwm a %d b %d head %d", sa.HWM, sb.HWM, sa.Head)
	}
}

func TestLazyAndFetch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, vpcRaw, "raw content")
	writeFile(t, a, vpcMeta, "meta")
	mustCommit(t, a, "")
	r := mustSync(t, b, SyncOptions{Lazy: true})
	if r.Written != 1 || r.Lazy != 1 {
		t.Fatalf("lazy sync %+v", r)
	}
	if _, ok := readFile(t, b, vpcRaw); ok {
		t.Fatal("lazy raw file fetched")
	}
	if st := mustStatus(t, b); st.Lazy != 1 || len(st.Dirty) != 0 {
		t.Fatalf("lazy-absent file taken for a change: %+v", st)
	}
	if c := mustCommit(t, b, ""); !c.Nothing {
		t.Fatalf("lazy-absent file committed as a deletion: %+v", c)
	}
	if _, err := b.Fetch(context.Background(), []string{vpcRaw}); err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, b, vpcRaw); got != "raw content" {
		t.Fatalf("fetch gave %q", got)
	}
	if _, err := b.Fetch(context.Background(), []string{"data/nope/x/y/1/raw"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("fetch of an unknown path: %v", err)
	}
}

func TestManifestCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	for i := range 3000 {
		writeFile(t, a, fmt.Sprintf("data/t/m/d/%d/raw", i), fmt.Sprint(i))
	}
	r := mustCommit(t, a, "many")
	if r.Written != 3000 || len(r.Seqs) != 1 {
		t.Fatalf("commit %+v", r)
	}
	rec, err := e.log.PartitionHead(context.Background(), "data--t--m")
	if err != nil || rec.Event.Manifest.IsZero() {
		t.Fatalf("3000 entries should go to a manifest: %v %v", rec.Event.Manifest, err)
	}
	mustSync(t, b, SyncOptions{})
	if got := len(cacheFiles(t, b)); got != 3000 {
		t.Fatalf("b has %d files", got)
	}
}

func TestConcurrentHostsDistinctModels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	n := 1000 // the acceptance figure
	if testing.Short() {
		n = 100
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, h := range []*Host{a, b} {
		wg.Add(1)
		go func(h *Host) {
			defer wg.Done()
			for i := range n {
				rel := fmt.Sprintf("data/t/%s/d/%d/raw", h.cfg.Host, i)
				writeFile(t, h, rel, "x")
				// Every tenth commit scans the whole cache; the others name the
				// path they wrote, as a dirty set does (CommitOptions.Changed),
				// so the test is the two hosts' publishes racing, not 2n walks
				// of a growing cache (O(n²) lstats, most of its time).
				opt := CommitOptions{Changed: []string{rel}}
				if i%10 == 0 {
					opt.Changed = nil
				}
				if _, err := h.Commit(context.Background(), opt); err != nil {
					errs <- fmt.Errorf("%s commit %d: %w", h.cfg.Host, i, err)
					return
				}
			}
		}(h)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mustSync(t, a, SyncOptions{})
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ:\n%s", diff)
	}
	sa, sb := mustStatus(t, a), mustStatus(t, b)
	if sa.HWM != sa.Head || sb.HWM != sb.Head || sa.Head != ledger.Seq(2*n) {
		t.Fatalf("hwm a %d b %d head %d, want %d", sa.HWM, sb.HWM, sa.Head, 2*n)
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan SyncResult, 10)
	done := make(chan error, 1)
	go func() { done <- b.Watch(ctx, SyncOptions{}, func(r SyncResult) { got <- r }) }()
	for i := range 3 {
		writeFile(t, a, fmt.Sprintf("audit/%d", i), "x")
		mustCommit(t, a, "")
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("watch did not apply the commit")
		}
		if _, ok := readFile(t, b, fmt.Sprintf("audit/%d", i)); !ok {
			t.Fatalf("file %d not in b's cache", i)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch stopped with %v", err)
	}
	if hwm := hwmOf(t, b); hwm != 3 {
		t.Fatalf("watch persisted hwm %d", hwm)
	}
}

// While one Host watches a cache, another Host on the same cache (another
// process: `exec`, `commit`, `status`) commits, syncs and reads status without
// waiting for the watch to end; the watch then reloads the state the other one
// changed and goes on applying remote commits, never persisting an older HWM.
func TestWatchSharesTheCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	remote := e.host("remote")
	dir := t.TempDir()
	var logged testmain.SyncBuffer
	watcher, err := Open(Config{Cache: dir, Host: "local", Log: e.log, Blobs: e.blobs,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan SyncResult, 100)
	done := make(chan error, 1)
	go func() { done <- watcher.Watch(ctx, SyncOptions{}, func(r SyncResult) { got <- r }) }()
	// The other Host takes the cache once the watch released it, and releases
	// it too: from then on each of its operations holds it for its own length.
	other, err := Open(Config{Cache: dir, Host: "local", Log: e.log, Blobs: e.blobs, LockWait: 3 * time.Second})
	if err != nil {
		t.Fatalf("open a second Host on a cache a running watch has open: %v", err)
	}
	other.Release()
	waitApplied := func(what string) {
		t.Helper()
		select {
		case <-got:
		case err := <-done:
			t.Fatalf("%s: watch stopped: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: watch did not apply the commit", what)
		}
	}
	for i := range 3 {
		writeFile(t, remote, fmt.Sprintf("audit/remote-%d", i), "r")
		mustCommit(t, remote, "")
		waitApplied(fmt.Sprintf("remote commit %d", i))

		// The other Host commits a local change in the watched cache.
		writeFile(t, other, fmt.Sprintf("audit/local-%d", i), "l")
		start := time.Now()
		res := mustCommit(t, other, "")
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("commit beside a running watch took %v", took)
		}
		if st := mustStatus(t, other); st.HWM != st.Head || len(st.Dirty) != 0 {
			t.Fatalf("status beside a running watch after commit %d (seq %v): %+v", i, res.Seqs, st)
		}
		waitApplied(fmt.Sprintf("own commit %d, seen by the watch", i))
	}
	writeFile(t, remote, "audit/remote-last", "r")
	mustCommit(t, remote, "")
	waitApplied("last remote commit")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch stopped with %v", err)
	}
	// The watch saw the state change under it after each of the other's commits.
	if n := strings.Count(logged.String(), "reloading"); n < 3 {
		t.Fatalf("the watch reloaded the state %d times, want at least 3 (once per commit of the other Host):\n%s", n, logged.String())
	}
	st := mustStatus(t, other)
	if st.HWM != st.Head || st.Head != 7 || watcher.HWM() != st.HWM {
		t.Fatalf("after the watch: %+v, watch's HWM %d; want hwm == head == 7", st, watcher.HWM())
	}
	if v, err := other.Verify(context.Background()); err != nil || !v.OK() {
		t.Fatalf("verify: %+v %v", v, err)
	}
	mustSync(t, remote, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, remote), cacheFiles(t, other)); diff != "" {
		t.Fatalf("caches differ:\n%s", diff)
	}
}

package swamp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/gcstest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/gcsblob"
	"github.com/syncledger/syncledger/ledger/s3blob"
	"github.com/syncledger/syncledger/swamp/index"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const fakeBucket = "swamp-fake"

// A backend opens stores on prefixes of one bucket of one server (gofakes3 in
// this process, fake-gcs-server in its own).
type backend func(t testing.TB, prefix string) *ledger.Bucket

func fileBackend(t testing.TB) backend {
	root := t.TempDir()
	return func(t testing.TB, prefix string) *ledger.Bucket { return fileStore(t, filepath.Join(root, prefix)) }
}

func s3Backend(t testing.TB) backend {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket(fakeBucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
	t.Cleanup(srv.Close)
	return func(t testing.TB, prefix string) *ledger.Bucket {
		st, err := s3blob.New(testCtx(t), s3blob.Config{Bucket: fakeBucket, Prefix: prefix, Endpoint: srv.URL, Region: "us-east-1",
			PathStyle: true, Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return ledger.NewBucket(st, ledger.RetryPolicy{Attempts: 1})
	}
}

func gcsBackend(t testing.TB) backend {
	t.Helper()
	srv := gcstest.Start(t)
	srv.CreateBucket(t, fakeBucket)
	return func(t testing.TB, prefix string) *ledger.Bucket {
		st, err := gcsblob.New(testCtx(t), gcsblob.Config{Bucket: fakeBucket, Prefix: prefix, Endpoint: srv.URL(), HTTPClient: &http.Client{}})
		if err != nil {
			t.Fatal(err)
		}
		return ledger.NewBucket(st, ledger.RetryPolicy{Attempts: 1})
	}
}

// upload copies a fixture directory into a store, key for key.
func upload(t testing.TB, dir string, dst *ledger.Bucket) {
	t.Helper()
	ctx := testCtx(t)
	err := fileStore(t, dir).ListObjects(ctx, "", func(info ledger.ObjectInfo) error {
		b, err := getAll(ctx, fileStore(t, dir), info.Key)
		if err != nil {
			return err
		}
		return dst.PutObject(ctx, info.Key, bytes.NewReader(b), int64(len(b)))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wantTree reads the digests a fixture's golden lists.
func wantTree(t testing.TB, name string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(readWant(t, name)) {
		f := strings.Fields(line)
		out[f[1]] = f[3]
	}
	return out
}

// TestMirrorRoundTrip uploads a fixture to a file, S3 and GCS backend, imports
// it from there, mirrors the ledger to another prefix of the same backend, and
// reads that back with an unscoped swamp v2 pull: the original tree.
func TestMirrorRoundTrip(t *testing.T) {
	t.Parallel()
	targets := []struct {
		name    string
		backend func(testing.TB) backend
		fixture string
		ns      string
	}{
		{"file", fileBackend, "v2", ""},
		{"file-namespaced", fileBackend, "namespaced", "team-a"},
		{"s3", s3Backend, "v2", ""},
		{"gcs", gcsBackend, "namespaced", "team-a"},
	}
	for _, tt := range targets {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			e := newEnv(t)
			be := tt.backend(t)
			src := be(t, "swamp/source")
			upload(t, fixture(t, tt.fixture), src)
			sum, err := Import(ctx, e.importConfig(src, tt.ns))
			if err != nil || !sum.Complete() {
				t.Fatalf("import: %+v, %v", sum, err)
			}
			target := be(t, "swamp/mirror")
			layout, _ := index.NewLayout(tt.ns)
			clk := &clock{now: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
			cfg := MirrorConfig{Log: e.log, Blobs: e.blobs, Target: target, Namespace: tt.ns, Now: clk.Now}
			m, err := NewMirror(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Step(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Commits != sum.Committed || res.CommitSeq != int64(sum.Committed) {
				t.Fatalf("step: %+v after %d import commits", res, sum.Committed)
			}
			tree, seq := pullV2(t, target, layout)
			if diff := cmp.Diff(wantTree(t, tt.fixture), treeDigests(tree)); diff != "" {
				t.Fatalf("pulled tree (-want +got):\n%s", diff)
			}
			if seq != res.CommitSeq {
				t.Fatalf("meta commitSeq %d, step says %d", seq, res.CommitSeq)
			}

			// A host commit: one file rewritten, one deleted (its partition
			// emptied), one added.
			gone := "workflows-evaluated/workflow-deploy.yaml"
			e.commit(t, map[string][]byte{
				"audit/2026-01-01.jsonl":     []byte("rewritten\n"),
				gone:                         nil,
				"logs/2026-02-01.log":        []byte("new\n"),
				"data/aws/ec2/vpc/x/a/1/raw": []byte("raw\n"),
			})
			res, err = m.Step(ctx)
			if err != nil || res.Commits != 1 || res.CommitSeq != seq+1 {
				t.Fatalf("step: %+v, %v", res, err)
			}
			tree, seq2 := pullV2(t, target, layout)
			st := readLedger(t, e)
			if diff := cmp.Diff(entryDigests(st.files), treeDigests(tree)); diff != "" || seq2 != seq+1 {
				t.Fatalf("pulled tree (-ledger +got):\n%s\ncommitSeq %d", diff, seq2)
			}
			meta, _ := index.ParseMeta(mustGet(t, target, layout.MetaKey()))
			for _, p := range meta.Partitions {
				if p == "workflows-evaluated" {
					t.Fatalf("emptied partition still listed: %v", meta.Partitions)
				}
			}
			// The unreachable objects stay for the grace period, then go.
			for _, key := range []string{layout.DataKey(gone), layout.ShardKey("workflows-evaluated")} {
				if _, err := target.StatObject(ctx, key); err != nil {
					t.Fatalf("%s deleted before its grace period: %v", key, err)
				}
			}
			clk.Add(DefaultDeleteGrace + time.Second)
			if res, err = m.Step(ctx); err != nil || res.Deleted != 2 {
				t.Fatalf("step after the grace period: %+v, %v", res, err)
			}
			for _, key := range []string{layout.DataKey(gone), layout.ShardKey("workflows-evaluated")} {
				if _, err := target.StatObject(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
					t.Fatalf("%s after the grace period: %v", key, err)
				}
			}

			// Restart: a new mirror resumes from the target's record.
			m2, err := NewMirror(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := m2.Step(ctx); err != nil || res.Commits != 0 || res.CommitSeq != seq2 {
				t.Fatalf("restarted step: %+v, %v", res, err)
			}
			e.commit(t, map[string][]byte{"audit/2026-01-01.jsonl": []byte("again\n")})
			if res, err := m2.Step(ctx); err != nil || res.Commits != 1 || res.CommitSeq != seq2+1 {
				t.Fatalf("restarted step: %+v, %v", res, err)
			}
			tree, _ = pullV2(t, target, layout)
			if got := string(tree["audit/2026-01-01.jsonl"]); got != "again\n" {
				t.Fatalf("after restart: %q", got)
			}
		})
	}
}

func mustGet(t testing.TB, objs *ledger.Bucket, key string) []byte {
	t.Helper()
	b, err := getAll(testCtx(t), objs, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMirrorRefusesForeignTargets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit(t, map[string][]byte{"audit/a": []byte("a")})
	ctx := testCtx(t)
	// A live swamp datastore without a mirror record.
	m, _ := NewMirror(MirrorConfig{Log: e.log, Blobs: e.blobs, Target: fileStore(t, copyDir(t, fixture(t, "v1")))})
	if _, err := m.Step(ctx); !errors.Is(err, ErrForeignLayout) {
		t.Fatalf("v1 datastore: %v", err)
	}
	m, _ = NewMirror(MirrorConfig{Log: e.log, Blobs: e.blobs, Target: fileStore(t, copyDir(t, fixture(t, "v2")))})
	if _, err := m.Step(ctx); !errors.Is(err, ErrForeignLayout) {
		t.Fatalf("v2 datastore: %v", err)
	}
	// A target mirroring another ledger.
	target := fileStore(t, t.TempDir())
	m, _ = NewMirror(MirrorConfig{Log: e.log, Blobs: e.blobs, Target: target})
	if _, err := m.Step(ctx); err != nil {
		t.Fatal(err)
	}
	other := newEnv(t)
	m, _ = NewMirror(MirrorConfig{Log: other.log, Blobs: other.blobs, Target: target})
	if _, err := m.Step(ctx); !errors.Is(err, ledger.ErrLineage) {
		t.Fatalf("other ledger: %v", err)
	}
	if err := m.Run(ctx); !errors.Is(err, ledger.ErrLineage) {
		t.Fatalf("Run on another ledger's target: %v", err)
	}
}

// TestMirrorRedoesAfterFailure fails each kind of write once and checks the next
// step redoes the commit and the target ends up right.
func TestMirrorRedoesAfterFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	for i, failOn := range []string{"audit/f", "_index/audit.json", "_index/_meta.json", "_control/" + ControlName} {
		e.commit(t, map[string][]byte{"audit/f": []byte(fmt.Sprint("v", i)), fmt.Sprint("audit/n", i): []byte("n")})
		var failed atomic.Bool
		target := fileStore(t, dir).View(func(d driver.Bucket) driver.Bucket {
			return &failingStore{Bucket: d, fail: func(key string) bool {
				return key == failOn && failed.CompareAndSwap(false, true)
			}}
		})
		m, _ := NewMirror(MirrorConfig{Log: e.log, Blobs: e.blobs, Target: target})
		if _, err := m.Step(ctx); err == nil {
			t.Fatalf("failing %s: step succeeded", failOn)
		}
		if _, err := m.Step(ctx); err != nil {
			t.Fatalf("after failing %s: %v", failOn, err)
		}
		tree, _ := pullV2(t, target, index.Layout{})
		if diff := cmp.Diff(entryDigests(readLedger(t, e).files), treeDigests(tree)); diff != "" {
			t.Fatalf("after failing %s (-ledger +target):\n%s", failOn, diff)
		}
	}
}

// TestMirrorConsistency has a reader poll the target while 500 commits are
// mirrored: every meta it reads lists only shards it can read, whose entries'
// objects all exist, and commitSeq never decreases.
func TestMirrorConsistency(t *testing.T) {
	t.Parallel()
	const commits = 500
	e := newEnv(t)
	e.blobs = newMemStore() // fsyncs would dominate the run time
	ctx := testCtx(t)
	target := newMemStore()
	m, err := NewMirror(MirrorConfig{Log: e.log, Blobs: e.blobs, Target: target, DeleteGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	paths := make([]string, 0, 24)
	for _, dir := range []string{"audit", "logs", "workflows-evaluated", "data/t/m1/d/1", "data/t/m2/d/1", "files"} {
		for i := range 4 {
			paths = append(paths, fmt.Sprintf("%s/f%d", dir, i))
		}
	}
	e.commit(t, map[string][]byte{paths[0]: []byte("first")})
	if _, err := m.Step(ctx); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var reads, lastSeq atomic.Int64
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			_, seq, err := tryPullV2(ctx, target, index.Layout{})
			if err != nil {
				readerErr <- err
				return
			}
			if prev := lastSeq.Swap(seq); seq < prev {
				readerErr <- fmt.Errorf("commitSeq went from %d to %d", prev, seq)
				return
			}
			reads.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for i := range commits - 1 {
		// Mostly single-partition commits (multi-partition ones are atomic
		// batches, about 15 ms each on one local node).
		files := map[string][]byte{}
		dir := rng.IntN(len(paths) / 4)
		for range 1 + rng.IntN(3) {
			p := paths[4*dir+rng.IntN(4)]
			if rng.IntN(10) == 0 {
				p = paths[rng.IntN(len(paths))]
			}
			if rng.IntN(4) == 0 {
				files[p] = nil
			} else {
				files[p] = fmt.Appendf(nil, "%s at %d", p, i)
			}
		}
		e.commit(t, files)
		if _, err := m.Step(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-readerErr:
			t.Fatalf("reader after %d commits: %v", i+1, err)
		default:
		}
	}
	close(done)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	tree, seq := pullV2(t, target, index.Layout{})
	if seq != commits {
		t.Fatalf("commitSeq %d after %d commits", seq, commits)
	}
	if diff := cmp.Diff(entryDigests(readLedger(t, e).files), treeDigests(tree)); diff != "" {
		t.Fatalf("final tree (-ledger +target):\n%s", diff)
	}
	t.Logf("%d consistent reads during %d commits", reads.Load(), commits)
}

func TestMirrorRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	target := fileStore(t, t.TempDir())
	m, err := NewMirror(MirrorConfig{Log: e.log, Blobs: e.blobs, Target: target, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	e.commit(t, map[string][]byte{"audit/a": []byte("a")})
	e.commit(t, map[string][]byte{"audit/b": []byte("b")})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if tree, seq, err := tryPullV2(testCtx(t), target, index.Layout{}); err == nil && seq == 2 {
			if len(tree) != 2 {
				t.Fatalf("tree %v", tree)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not mirror 2 commits within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

package host

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/ledger/s3blob"
)

// waits records the waits a host reports.
type waits struct {
	mu    sync.Mutex
	start time.Time
	got   []Wait
	at    []time.Duration // since start
}

func (w *waits) tell(wt Wait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, wt)
	w.at = append(w.at, time.Since(w.start))
}

func (w *waits) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start, w.got, w.at = time.Now(), nil, nil
}

func (w *waits) list() ([]Wait, []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got), slices.Clone(w.at)
}

// stallPolicy is the bound of the tests of a server that never answers: a
// push gives up after 3 s without an answer, and says what it waits for
// after 500 ms.
var stallPolicy = Policy{Wait: 3 * time.Second, Report: 500 * time.Millisecond}

// checkGaveUp checks that a push (op) to a server that never answers gave
// up within its bound — Wait, and a tick of the watch, after it began to
// wait, with some slack for a loaded machine; at it, unless a request below
// gave up sooner (sooner) — with a *WaitError on on, having said what it
// waited for if it waited longer than Report.
func checkGaveUp(t *testing.T, op string, err error, took time.Duration, w *waits, on, what string, sooner bool) {
	t.Helper()
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("%s against a server that never answers: %v, want a *WaitError", op, err)
	}
	if we.On != on || !strings.Contains(we.What, what) || we.Op != op {
		t.Fatalf("%s gave up waiting %s %q (%s), want on %s %q", op, we.On, we.What, we.Op, on, what)
	}
	if limit := stallPolicy.Wait + 2*time.Second; took < stallPolicy.Wait && !sooner || took > limit {
		t.Fatalf("%s gave up after %v, want after %v and within %v: %v", op, took, stallPolicy.Wait, limit, err)
	}
	got, at := w.list()
	if took < stallPolicy.Report && len(got) == 0 {
		t.Logf("%s: gave up after %v, before it had to say what it waited for: %v", op, took, err)
		return
	}
	if len(got) == 0 || at[0] > stallPolicy.Report+time.Second || got[0].On != on || !strings.Contains(got[0].String(), "waiting for "+got[0].Server()) {
		t.Fatalf("%s told %v at %v; want what it waits for (%s) within %v", op, got, at, on, stallPolicy.Report+time.Second)
	}
	t.Logf("%s: told %q after %v; gave up after %v: %v", op, got[0], at[0], took, err)
}

// A push to a NATS server that never answers — a network cut that drops
// packets, the connection still open — gives up within the policy's bound,
// saying what it waits for meanwhile, and loses nothing: its files stay
// dirty, and the next commit, once the server answers, publishes them.
func TestPushServerNeverAnswers(t *testing.T) {
	srv, _ := natsjstest.RunServer(t)
	proxy, err := faulty.NewProxy(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	e := natsEnv(t, proxy.URL())
	w := &waits{}
	a, err := Open(Config{Cache: t.TempDir(), Host: "a", Log: e.log, Blobs: e.blobs, Policy: stallPolicy, Waiting: w.tell})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writeFile(t, a, "audit/x", "1")
	mustCommit(t, a, "first")
	head := mustStatus(t, a).Head

	writeFile(t, a, "audit/x", "2")
	writeFile(t, a, "audit/y", "new")
	// Cut from the publish on (the requests before it, the check of the
	// cache's last commit, have timeouts of their own, shorter than Wait).
	proxy.StallAt([]byte("syncledger.test.p."))
	w.reset()
	start := time.Now()
	_, err = a.Commit(context.Background(), CommitOptions{Message: "cut off"})
	checkGaveUp(t, "commit", err, time.Since(start), w, "log", "to take the commit", false)

	// A pull gives up as soon as a request does (the log's own timeout), or
	// at the bound.
	w.reset()
	start = time.Now()
	_, err = a.Sync(context.Background(), SyncOptions{})
	checkGaveUp(t, "sync", err, time.Since(start), w, "log", "to answer", true)

	proxy.SetStalled(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.Commit(ctx, CommitOptions{Message: "after the cut"})
	st := mustStatus(t, a)
	if err != nil || len(st.Dirty) != 0 || st.Head <= head {
		t.Fatalf("the next commit once the server answers: %+v, %v; status %+v", res, err, st)
	}
	b := e.host("b")
	mustSync(t, b, SyncOptions{})
	for rel, want := range map[string]string{"audit/x": "2", "audit/y": "new"} {
		if got, _ := readFile(t, b, rel); got != want {
			t.Fatalf("b's %s: %q, want %q", rel, got, want)
		}
	}
}

// A push to a blob store that accepts connections and never answers (an S3
// endpoint that hangs) gives up within the policy's bound — each put's
// attempt bounded from it (RetryPolicy.AttemptTimeout), the store's retries
// inside it — saying what it waits for, and publishes nothing: the files
// stay dirty, and the next commit, once the store answers, publishes them.
func TestPushBlobStoreNeverAnswers(t *testing.T) {
	mem := s3mem.New()
	if err := mem.CreateBucket("blobs"); err != nil {
		t.Fatal(err)
	}
	hang := faulty.NewHang(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
	srv := httptest.NewServer(hang)
	t.Cleanup(srv.Close)
	t.Cleanup(hang.Close)
	st, err := s3blob.New(context.Background(), s3blob.Config{Bucket: "blobs", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	blobs := ledger.NewBucket(st, ledger.RetryPolicy{}) // the CLI's: 4 attempts, no attempt timeout of its own
	w := &waits{}
	a, err := Open(Config{Cache: t.TempDir(), Host: "a", Log: e.log, Blobs: blobs, Policy: stallPolicy, Waiting: w.tell})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writeFile(t, a, "audit/x", "1")
	mustCommit(t, a, "first")
	head := mustStatus(t, a).Head

	writeFile(t, a, "audit/x", "2")
	writeFile(t, a, "data/m/x/d/1/raw", strings.Repeat("big ", 1<<19)) // 2 MiB: read twice, streamed
	hang.Set(true)
	w.reset()
	start := time.Now()
	_, err = a.Commit(context.Background(), CommitOptions{Message: "store hangs"})
	checkGaveUp(t, "commit", err, time.Since(start), w, "blobs", "", false)
	if hang.Held() == 0 {
		t.Fatal("the store held no request")
	}
	// status lists the snapshots in the blob store: bounded too.
	w.reset()
	start = time.Now()
	_, err = a.Status(context.Background())
	checkGaveUp(t, "status", err, time.Since(start), w, "blobs", "", true)

	hang.Set(false)
	if st := mustStatus(t, a); st.Head != head || len(st.Dirty) != 2 {
		t.Fatalf("after the push that gave up: head %d (want %d: nothing published), dirty %q", st.Head, head, st.Dirty)
	}
	if r := mustCommit(t, a, "once the store answers"); r.Written != 2 {
		t.Fatalf("the next commit: %+v", r)
	}
	b, err := Open(Config{Cache: t.TempDir(), Host: "b", Log: e.log, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustSync(t, b, SyncOptions{})
	if got, _ := readFile(t, b, "audit/x"); got != "2" {
		t.Fatalf("b's audit/x: %q", got)
	}
}

// refusingStore is a blob driver that, while refusing, answers every
// request after delay with a failure the stack retries (an S3 503 "slow
// down").
type refusingStore struct {
	driver.Bucket
	delay    time.Duration
	refusing atomic.Bool
	refused  atomic.Int64
}

var errSlowDown = errors.New("503 SlowDown: please reduce your request rate")

func (s *refusingStore) refuse(ctx context.Context) error {
	if !s.refusing.Load() {
		return nil
	}
	s.refused.Add(1)
	if err := ledger.SleepCtx(ctx, s.delay); err != nil {
		return err
	}
	return errSlowDown
}

func (s *refusingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.refuse(ctx); err != nil {
		return err
	}
	return s.Bucket.Put(ctx, key, r, size)
}

func (s *refusingStore) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	if err := s.refuse(ctx); err != nil {
		return driver.ObjectInfo{}, err
	}
	return s.Bucket.Stat(ctx, key)
}

func (s *refusingStore) NewBatch() driver.Batch { return refusingBatch{s.Bucket.NewBatch(), s} }

type refusingBatch struct {
	driver.Batch
	s *refusingStore
}

func (b refusingBatch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := b.s.refuse(ctx); err != nil {
		return err
	}
	return b.Batch.Put(ctx, key, r, size)
}

func (b refusingBatch) Flush(ctx context.Context) error {
	if err := b.s.refuse(ctx); err != nil {
		return err
	}
	return b.Batch.Flush(ctx)
}

// A push's time without progress is bounded by the one policy, whatever the
// stores below retry: a blob store that answers every request — within the
// attempt's bound, so the store's retries go on — with a failure it retries
// (a 503), under a bucket policy of 20 attempts, 20 × 400 ms before the
// Bucket would give up, is given up on at Policy.Wait, saying what the push
// waits for and the store's last failure; nothing is published, the files
// stay dirty, and the next commit publishes them.
func TestPushBoundRefusals(t *testing.T) {
	e := newEnv(t)
	st := &refusingStore{Bucket: e.objs, delay: 400 * time.Millisecond}
	blobs := ledger.NewBucket(st, ledger.RetryPolicy{Attempts: 20, Wait: 10 * time.Millisecond, MaxWait: 10 * time.Millisecond})
	w := &waits{}
	a, err := Open(Config{Cache: t.TempDir(), Host: "a", Log: e.log, Blobs: blobs, Policy: stallPolicy, Waiting: w.tell})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writeFile(t, a, "audit/x", "1")
	mustCommit(t, a, "first")
	head := mustStatus(t, a).Head

	writeFile(t, a, "audit/x", "2")
	st.refusing.Store(true)
	w.reset()
	start := time.Now()
	_, err = a.Commit(context.Background(), CommitOptions{Message: "refused"})
	took := time.Since(start)
	checkGaveUp(t, "commit", err, took, w, "blobs", "", false)
	if got, _ := w.list(); !errors.Is(got[0].Last, errSlowDown) {
		t.Fatalf("the wait told %v, want the store's last failure (%v)", got[0], errSlowDown)
	}
	if n := st.refused.Load(); n < 3 || n >= 20 {
		t.Fatalf("the store refused %d requests: want the push to have retried, and given up before the store's policy (20)", n)
	}
	st.refusing.Store(false)
	if st := mustStatus(t, a); st.Head != head || len(st.Dirty) != 1 {
		t.Fatalf("after the push that gave up: head %d (want %d), dirty %q", st.Head, head, st.Dirty)
	}
	if r := mustCommit(t, a, "once the store takes it"); r.Written != 1 {
		t.Fatalf("the next commit: %+v", r)
	}
}

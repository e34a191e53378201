package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// scripted fails the first fails[op] calls of each op with err, then passes
// them to the driver under it (a file store).
type scripted struct {
	driver.Bucket
	fails map[string]int
	err   error
	calls map[string]*atomic.Int64
	hang  bool // failing calls hang until their context ends
}

func newScripted(t *testing.T, err error, fails map[string]int) *scripted {
	t.Helper()
	fs, ferr := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if ferr != nil {
		t.Fatal(ferr)
	}
	s := &scripted{Bucket: fs, fails: fails, err: err, calls: map[string]*atomic.Int64{}}
	for _, op := range []string{"put", "get", "stat", "delete", "list"} {
		s.calls[op] = &atomic.Int64{}
	}
	return s
}

func (s *scripted) fail(ctx context.Context, op string) error {
	if n := s.calls[op].Add(1); n <= int64(s.fails[op]) {
		if s.hang {
			<-ctx.Done()
			return ctx.Err()
		}
		return s.err
	}
	return nil
}

func (s *scripted) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.fail(ctx, "put"); err != nil {
		_, _ = io.CopyN(io.Discard, r, 3) // a put that broke after reading a little
		return err
	}
	return s.Bucket.Put(ctx, key, r, size)
}

// NewBatch: the scripted puts and stats, each durable when it returns.
func (s *scripted) NewBatch() driver.Batch { return driver.DurableEach(s) }

func (s *scripted) Stat(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := s.fail(ctx, "stat"); err != nil {
		return ledger.ObjectInfo{}, err
	}
	return s.Bucket.Stat(ctx, key)
}

func (s *scripted) List(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	failing := s.fail(ctx, "list")
	n := 0
	return s.Bucket.List(ctx, prefix, func(info ledger.ObjectInfo) error {
		if failing != nil && n == 1 {
			return failing // fails part way, after one object
		}
		n++
		return fn(info)
	})
}

var quick = ledger.RetryPolicy{Attempts: 4, Wait: time.Millisecond, MaxWait: 2 * time.Millisecond}

var errTransient = errors.New("503 slow down")

func TestRetryingStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("put replays its content", func(t *testing.T) {
		// Kept as it is read (a pipe, a stream), or sought back (a file).
		for _, r := range []io.Reader{noSeek{strings.NewReader("hello world")}, strings.NewReader("hello world")} {
			s := newScripted(t, errTransient, map[string]int{"put": 2})
			rs := ledger.NewBucket(s, quick)
			if err := rs.PutObject(ctx, "k", r, 11); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(must(rs.GetObject(ctx, "k")))
			if err != nil || string(b) != "hello world" {
				t.Fatalf("%T: read back %q, %v", r, b, err)
			}
			if n := s.calls["put"].Load(); n != 3 {
				t.Fatalf("%T: %d put attempts, want 3", r, n)
			}
		}
	})
	t.Run("a blob's content that can seek is sent again whatever its length", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"put": 2})
		p := quick
		p.MaxReplay = 2
		body := bytes.Repeat([]byte("longer than the buffer "), 100)
		d := ledger.DigestOf(body)
		if err := ledger.NewBucket(s, p).Put(ctx, d, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatalf("put of %d bytes from a bytes.Reader through two failures: %v", len(body), err)
		}
		if got, err := ledger.ReadBlob(ctx, ledger.NewBucket(s, p), d); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("read back %d bytes, %v", len(got), err)
		}
	})
	t.Run("gives up after the attempts, naming them", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"stat": 10})
		_, err := ledger.NewBucket(s, quick).StatObject(ctx, "k")
		if !errors.Is(err, errTransient) || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("definite answers are not retried", func(t *testing.T) {
		for _, final := range []error{ledger.ErrNotFound, ledger.ErrInvalid, ledger.ErrChecksum, &ledger.ServerFullError{}, context.Canceled} {
			s := newScripted(t, final, map[string]int{"stat": 10})
			if _, err := ledger.NewBucket(s, quick).StatObject(ctx, "k"); !errors.Is(err, final) {
				t.Fatalf("err = %v, want %v", err, final)
			}
			if n := s.calls["stat"].Load(); n != 1 {
				t.Fatalf("%v: %d attempts, want 1", final, n)
			}
		}
	})
	t.Run("the content's reader failing is not retried", func(t *testing.T) {
		s := newScripted(t, errTransient, nil)
		boom := errors.New("disk read error")
		err := ledger.NewBucket(s, quick).PutObject(ctx, "k", io.MultiReader(strings.NewReader("ab"), iotest{boom}), -1)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the reader's error", err)
		}
		if n := s.calls["put"].Load(); n != 1 {
			t.Fatalf("%d put attempts, want 1", n)
		}
	})
	t.Run("content longer than the replay buffer is not sent again", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"put": 1})
		p := quick
		p.MaxReplay = 2
		err := ledger.NewBucket(s, p).PutObject(ctx, "k", noSeek{strings.NewReader("longer")}, 6)
		if !errors.Is(err, errTransient) || !strings.Contains(err.Error(), "not retried") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a hanging attempt is abandoned and retried", func(t *testing.T) {
		s := newScripted(t, nil, map[string]int{"stat": 1})
		s.hang = true
		p := quick
		p.AttemptTimeout = 20 * time.Millisecond
		if err := s.Bucket.Put(ctx, "k", strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.NewBucket(s, p).StatObject(ctx, "k"); err != nil {
			t.Fatalf("stat after a hang: %v", err)
		}
	})
	t.Run("a list that fails part way resumes without repeating", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"list": 1})
		for _, k := range []string{"a", "b", "c"} {
			if err := s.Bucket.Put(ctx, k, bytes.NewReader(nil), 0); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		err := ledger.NewBucket(s, quick).ListObjects(ctx, "", func(info ledger.ObjectInfo) error {
			got = append(got, info.Key)
			return nil
		})
		if err != nil || strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("listed %v, %v", got, err)
		}
	})
	t.Run("fn's error is returned, not retried", func(t *testing.T) {
		s := newScripted(t, errTransient, nil)
		if err := s.Bucket.Put(ctx, "a", bytes.NewReader(nil), 0); err != nil {
			t.Fatal(err)
		}
		stop := errors.New("stop")
		err := ledger.NewBucket(s, quick).ListObjects(ctx, "", func(ledger.ObjectInfo) error { return stop })
		if err != stop {
			t.Fatalf("err = %v, want fn's error as is", err)
		}
	})
	t.Run("blob operations are retried as keyed ones are", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"stat": 2})
		bs := ledger.NewBucket(s, quick)
		d := ledger.DigestOf([]byte("x"))
		if err := s.Bucket.Put(ctx, ledger.BlobKey(d), strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		if info, err := bs.Stat(ctx, d); err != nil || info.Size != 1 {
			t.Fatalf("blob Stat through two failures = %+v, %v", info, err)
		}
		if n := s.calls["stat"].Load(); n != 3 {
			t.Fatalf("%d stat attempts, want 3", n)
		}
	})
}

// cutting is a scripted store whose gets' bodies fail after 3 bytes, the
// first fails["get"] times.
type cutting struct{ *scripted }

func (s cutting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Bucket.Get(ctx, key)
	if err != nil || s.calls["get"].Add(1) > int64(s.fails["get"]) {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, 3), iotest{s.err}), rc}, nil
}

// TestRetryingStoreResumesCutBodies: a get body that fails part way is
// continued from a new get, and reads whole.
func TestRetryingStoreResumesCutBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cutting{newScripted(t, errTransient, map[string]int{"get": 2})}
	rs := ledger.NewBucket(s, quick)
	if err := rs.PutObject(ctx, "k", strings.NewReader("hello world"), 11); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(must(rs.GetObject(ctx, "k")))
	if err != nil || string(b) != "hello world" {
		t.Fatalf("read back %q, %v; want the body resumed after its cuts", b, err)
	}
	if n := s.calls["get"].Load(); n != 3 {
		t.Fatalf("%d gets, want 3 (two cut bodies resumed)", n)
	}
}

// noSeek hides its reader's Seek: content that cannot be sought back.
type noSeek struct{ io.Reader }

type iotest struct{ err error }

func (r iotest) Read([]byte) (int, error) { return 0, r.err }

func must(rc io.ReadCloser, err error) io.ReadCloser {
	if err != nil {
		panic(err)
	}
	return rc
}

// TestRetryingStoreConformance: a bucket that retries keeps the contracts
// of keyed objects and blobs (atomic puts, failing readers, cancellation,
// list order), and a missing bucket and a refused permission are final.
func TestRetryingStoreConformance(t *testing.T) {
	t.Parallel()
	drivertest.TestBucket(t, drivertest.Harness{
		New:      func(t *testing.T) driver.Bucket { return newScripted(t, nil, nil) },
		NoBucket: func(*testing.T) driver.Bucket { return memledger.MissingBucket() },
		Denied:   func(*testing.T) driver.Bucket { return memledger.DeniedBucket() },
		Retry:    quick,
	})
}

// dribbling reads a put's content a few bytes at a time, pausing between
// reads, then stores it; hang, instead, reads it whole and never answers
// (until the attempt's context ends), the first fails times.
type dribbling struct {
	*scripted
	pause time.Duration
	hang  int
	puts  atomic.Int64
}

func (d *dribbling) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if d.puts.Add(1) <= int64(d.hang) {
		_, _ = io.Copy(io.Discard, r)
		<-ctx.Done()
		return ctx.Err()
	}
	var buf bytes.Buffer
	p := make([]byte, 2)
	for {
		time.Sleep(d.pause)
		n, err := r.Read(p)
		buf.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return d.Bucket.Put(ctx, key, &buf, size)
}

// A put's attempt is bounded by AttemptTimeout while the store takes none of
// its content: a slow put whose bytes flow is not cut however long it
// lasts in all; a store that reads the content and never answers is
// abandoned AttemptTimeout after its last read and asked again.
func TestPutAttemptIdle(t *testing.T) {
	ctx := context.Background()
	// The pauses a tenth of the attempt's bound: a loaded machine's
	// scheduling delays do not cut the slow put.
	p := ledger.RetryPolicy{Attempts: 2, Wait: time.Millisecond, AttemptTimeout: 250 * time.Millisecond}
	content := strings.Repeat("x", 100) // 50 reads of 2 bytes, 25 ms apart: 1.25 s in all
	d := &dribbling{scripted: newScripted(t, nil, nil), pause: 25 * time.Millisecond}
	start := time.Now()
	if err := ledger.NewBucket(d, p).PutObject(ctx, "slow", strings.NewReader(content), int64(len(content))); err != nil {
		t.Fatalf("a slow put whose bytes flow: %v", err)
	}
	if took := time.Since(start); took < 4*p.AttemptTimeout || d.puts.Load() != 1 {
		t.Fatalf("the slow put took %v in %d attempts: want one attempt longer than 4 attempt timeouts", took, d.puts.Load())
	}

	d = &dribbling{scripted: newScripted(t, nil, nil), hang: 1}
	start = time.Now()
	if err := ledger.NewBucket(d, p).PutObject(ctx, "hung", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("a put whose first attempt hangs: %v", err)
	}
	if took := time.Since(start); took < p.AttemptTimeout || took > 5*p.AttemptTimeout || d.puts.Load() != 2 {
		t.Fatalf("the put whose first attempt hangs took %v in %d attempts: want about one attempt timeout, 2 attempts", took, d.puts.Load())
	}

	d = &dribbling{scripted: newScripted(t, nil, nil), hang: 2}
	err := ledger.NewBucket(d, p).PutObject(ctx, "never", strings.NewReader("x"), 1)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer for 250ms") {
		t.Fatalf("a put the store never answers: %v, want a deadline saying how long it waited", err)
	}
}

// WithRetry: the same storage under another policy.
func TestBucketWithRetry(t *testing.T) {
	s := newScripted(t, errors.New("transient"), map[string]int{"stat": 1})
	b := ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
	if err := s.Bucket.Put(context.Background(), "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	r := b.WithRetry(ledger.RetryPolicy{Attempts: 2, Wait: time.Millisecond})
	if got := r.Retry(); got.Attempts != 2 || got.MaxWait != 2*time.Second || b.Retry().Attempts != 1 {
		t.Fatalf("policies %+v and %+v", got, b.Retry())
	}
	if _, err := r.StatObject(context.Background(), "k"); err != nil {
		t.Fatalf("stat retried under the new policy: %v", err)
	}
}

// httpStatus is an SDK error that reports its HTTP status.
type httpStatus int

func (s httpStatus) Error() string       { return "http status" }
func (s httpStatus) HTTPStatusCode() int { return int(s) }

// DefaultRetryable tells the definite answers — the ledger's sentinels, a
// lost lock among them, wrapped however deep — from what may pass.
func TestDefaultRetryable(t *testing.T) {
	t.Parallel()
	lost := &ledger.LockLostError{Lock: "data/t/m/.lock"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("connection reset"), true},
		{context.DeadlineExceeded, true},
		{ledger.ErrUnreachable, true},
		{httpStatus(503), true},
		{httpStatus(429), true},
		{httpStatus(403), false},
		{context.Canceled, false},
		{ledger.ErrPermission, false},
		{ledger.ErrInvalid, false},
		{ledger.ErrServerFull, false},
		{ledger.ErrConflict, false},
		{ledger.ErrLockLost, false},
		{lost, false},
		{fmt.Errorf("append: %w", lost), false},
	} {
		if got := ledger.DefaultRetryable(tc.err); got != tc.want {
			t.Errorf("DefaultRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

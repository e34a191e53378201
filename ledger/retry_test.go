package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/fileblob"
)

// scripted fails the first fails[op] calls of each op with err, then passes
// them to the file store.
type scripted struct {
	ledger.ObjectStore
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
	s := &scripted{ObjectStore: fs, fails: fails, err: err, calls: map[string]*atomic.Int64{}}
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

func (s *scripted) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.fail(ctx, "put"); err != nil {
		_, _ = io.CopyN(io.Discard, r, 3) // a put that broke after reading a little
		return err
	}
	return s.ObjectStore.PutObject(ctx, key, r, size)
}

func (s *scripted) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := s.fail(ctx, "stat"); err != nil {
		return ledger.ObjectInfo{}, err
	}
	return s.ObjectStore.StatObject(ctx, key)
}

func (s *scripted) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	failing := s.fail(ctx, "list")
	n := 0
	return s.ObjectStore.ListObjects(ctx, prefix, func(info ledger.ObjectInfo) error {
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
		s := newScripted(t, errTransient, map[string]int{"put": 2})
		rs := ledger.NewRetryingStore(s, quick)
		if err := rs.PutObject(ctx, "k", strings.NewReader("hello world"), 11); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(must(rs.GetObject(ctx, "k")))
		if err != nil || string(b) != "hello world" {
			t.Fatalf("read back %q, %v", b, err)
		}
		if n := s.calls["put"].Load(); n != 3 {
			t.Fatalf("%d put attempts, want 3", n)
		}
	})
	t.Run("gives up after the attempts, naming them", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"stat": 10})
		_, err := ledger.NewRetryingStore(s, quick).StatObject(ctx, "k")
		if !errors.Is(err, errTransient) || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("definite answers are not retried", func(t *testing.T) {
		for _, final := range []error{ledger.ErrNotFound, ledger.ErrInvalid, ledger.ErrChecksum, &ledger.ServerFullError{}, context.Canceled} {
			s := newScripted(t, final, map[string]int{"stat": 10})
			if _, err := ledger.NewRetryingStore(s, quick).StatObject(ctx, "k"); !errors.Is(err, final) {
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
		err := ledger.NewRetryingStore(s, quick).PutObject(ctx, "k", io.MultiReader(strings.NewReader("ab"), iotest{boom}), -1)
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
		err := ledger.NewRetryingStore(s, p).PutObject(ctx, "k", strings.NewReader("longer"), 6)
		if !errors.Is(err, errTransient) || !strings.Contains(err.Error(), "not retried") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a hanging attempt is abandoned and retried", func(t *testing.T) {
		s := newScripted(t, nil, map[string]int{"stat": 1})
		s.hang = true
		p := quick
		p.AttemptTimeout = 20 * time.Millisecond
		if err := s.ObjectStore.PutObject(ctx, "k", strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.NewRetryingStore(s, p).StatObject(ctx, "k"); err != nil {
			t.Fatalf("stat after a hang: %v", err)
		}
	})
	t.Run("a list that fails part way resumes without repeating", func(t *testing.T) {
		s := newScripted(t, errTransient, map[string]int{"list": 1})
		for _, k := range []string{"a", "b", "c"} {
			if err := s.ObjectStore.PutObject(ctx, k, bytes.NewReader(nil), 0); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		err := ledger.NewRetryingStore(s, quick).ListObjects(ctx, "", func(info ledger.ObjectInfo) error {
			got = append(got, info.Key)
			return nil
		})
		if err != nil || strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("listed %v, %v", got, err)
		}
	})
	t.Run("fn's error is returned, not retried", func(t *testing.T) {
		s := newScripted(t, errTransient, nil)
		if err := s.ObjectStore.PutObject(ctx, "a", bytes.NewReader(nil), 0); err != nil {
			t.Fatal(err)
		}
		stop := errors.New("stop")
		err := ledger.NewRetryingStore(s, quick).ListObjects(ctx, "", func(ledger.ObjectInfo) error { return stop })
		if err != stop {
			t.Fatalf("err = %v, want fn's error as is", err)
		}
	})
	t.Run("Objects is the retrying store", func(t *testing.T) {
		rs := ledger.NewRetryingStore(newScripted(t, nil, nil), quick)
		if got := ledger.NewBlobStore(rs).Objects(); got != rs {
			t.Fatal("the blob store's Objects is not the retrying store")
		}
	})
}

// selfRetrying is a scripted store whose client retries its own requests; its
// gets' bodies fail after 3 bytes, the first fails["get"] times.
type selfRetrying struct {
	*scripted
	attempts *atomic.Int64 // as RetryRequests set them
}

func (s selfRetrying) RetryRequests(attempts int) ledger.ObjectStore {
	s.attempts.Store(int64(attempts))
	return s
}

func (s selfRetrying) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.ObjectStore.GetObject(ctx, key)
	if err != nil || s.calls["get"].Add(1) > int64(s.fails["get"]) {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, 3), iotest{s.err}), rc}, nil
}

// TestRetryingStoreOfRequestRetrier: a store whose client retries its own
// requests gets the policy's attempts and is not retried again, and a get
// body it cuts part way is resumed.
func TestRetryingStoreOfRequestRetrier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := selfRetrying{newScripted(t, errTransient, map[string]int{"put": 1, "stat": 5, "get": 2}), &atomic.Int64{}}
	rs := ledger.NewRetryingStore(s, quick)
	if n := s.attempts.Load(); n != int64(quick.Attempts) {
		t.Fatalf("the store's client was given %d attempts, want the policy's %d", n, quick.Attempts)
	}
	if err := rs.PutObject(ctx, "k", strings.NewReader("hello world"), 11); !errors.Is(err, errTransient) {
		t.Fatalf("put = %v, want the store's error", err)
	}
	if _, err := rs.StatObject(ctx, "k"); !errors.Is(err, errTransient) || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("stat = %v, want the store's error as it is", err)
	}
	for op, want := range map[string]int64{"put": 1, "stat": 1} {
		if n := s.calls[op].Load(); n != want {
			t.Errorf("%d %s attempts, want %d", n, op, want)
		}
	}
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

type iotest struct{ err error }

func (r iotest) Read([]byte) (int, error) { return 0, r.err }

func must(rc io.ReadCloser, err error) io.ReadCloser {
	if err != nil {
		panic(err)
	}
	return rc
}

// TestRetryingStoreConformance: the retrying store keeps the ObjectStore and
// BlobStore contracts (atomic puts, failing readers, cancellation, list order).
func TestRetryingStoreConformance(t *testing.T) {
	t.Parallel()
	newStore := func(t *testing.T) ledger.ObjectStore {
		return ledger.NewRetryingStore(newScripted(t, nil, nil), quick)
	}
	t.Run("ObjectStore", func(t *testing.T) { drivertest.TestObjectStore(t, newStore) })
	t.Run("BlobStore", func(t *testing.T) { drivertest.TestBlobStore(t, newStore) })
}

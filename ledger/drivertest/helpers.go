package drivertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// timeout bounds every subtest, so a hanging backend fails instead of stalling the run.
const timeout = 2 * time.Minute

// errBoom is what failing readers return.
var errBoom = errors.New("drivertest: reader failed")

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// randomBytes returns n pseudo-random bytes, the same for the same seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, ctx context.Context, s *ledger.Bucket, key string, b []byte) {
	t.Helper()
	if err := s.PutObject(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("PutObject(%q, %d bytes) = %v", key, len(b), err)
	}
}

func get(t *testing.T, ctx context.Context, s *ledger.Bucket, key string) []byte {
	t.Helper()
	rc, err := s.GetObject(ctx, key)
	if err != nil {
		t.Fatalf("GetObject(%q) = %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read object %q: %v", key, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("close object %q: %v", key, err)
	}
	return b
}

// wantContent fails unless got equals want; large contents are reported by hash.
func wantContent(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) <= 64 && len(want) <= 64 {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
	t.Fatalf("%s = %d bytes (sha256 %x), want %d bytes (sha256 %x)",
		what, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
}

// wantAbsent fails unless key is absent: Get and Stat report ErrNotFound and List
// does not show it.
func wantAbsent(t *testing.T, ctx context.Context, s *ledger.Bucket, key string) {
	t.Helper()
	if rc, err := s.GetObject(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("GetObject(%q) = %v, want ErrNotFound", key, err)
	}
	if info, err := s.StatObject(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("StatObject(%q) = %+v, %v, want ErrNotFound", key, info, err)
	}
	for _, info := range list(t, ctx, s, "") {
		if info.Key == key {
			t.Fatalf("ListObjects shows %q (%d bytes), want it absent", key, info.Size)
		}
	}
}

func list(t *testing.T, ctx context.Context, s *ledger.Bucket, prefix string) []ledger.ObjectInfo {
	t.Helper()
	var infos []ledger.ObjectInfo
	err := s.ListObjects(ctx, prefix, func(info ledger.ObjectInfo) error {
		infos = append(infos, info)
		return nil
	})
	if err != nil {
		t.Fatalf("ListObjects(%q) = %v", prefix, err)
	}
	return infos
}

func keys(infos []ledger.ObjectInfo) []string {
	ks := make([]string, 0, len(infos))
	for _, info := range infos {
		ks = append(ks, info.Key)
	}
	return ks
}

// wantModTime fails unless mt is set and plausible (within a day of now: fakes and
// real servers may run on their own clocks, but never report the zero time).
func wantModTime(t *testing.T, what string, mt time.Time) {
	t.Helper()
	if d := time.Since(mt); mt.IsZero() || d > 24*time.Hour || d < -24*time.Hour {
		t.Errorf("%s ModTime = %v, want about now", what, mt)
	}
}

// onlyReader hides every method but Read, so a backend cannot seek, stat or
// WriteTo its way around reading.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// failingReader returns good bytes, then err.
type failingReader struct {
	good []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.good) == 0 {
		return 0, f.err
	}
	n := copy(p, f.good)
	f.good = f.good[n:]
	return n, nil
}

// eofReader records whether the reader it wraps reported io.EOF.
type eofReader struct {
	r   io.Reader
	eof atomic.Bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof.Store(true)
	}
	return n, err
}

// cancellingReader calls cancel after handing out its first chunk, then keeps
// supplying data as if nothing happened.
type cancellingReader struct {
	r      io.Reader
	cancel context.CancelFunc
	reads  int
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := c.r.Read(p)
	c.reads++
	if c.reads == 1 {
		c.cancel()
	}
	return n, err
}

// once is the retry policy of the suites' buckets: one attempt, so that no
// answer of the driver is hidden.
var once = ledger.RetryPolicy{Attempts: 1}

// open returns the bucket over d, closed when the test ends.
func open(t *testing.T, d driver.Bucket, p ledger.RetryPolicy) *ledger.Bucket {
	t.Helper()
	b := ledger.NewBucket(d, p)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return b
}

// counter counts the puts, and all the calls, that reach the wrapped
// driver, its batches' included.
type counter struct {
	driver.Bucket
	puts  atomic.Int64
	calls atomic.Int64
	// age, when set, makes Stat report objects as stored that much earlier
	// than they were (a backend cannot be told to backdate an object).
	age atomic.Int64
}

// PreferPut is false: the suites check every driver's existence-check path,
// which a driver's preference only skips (ledger's TestPutPreferrer checks
// the skipping).
func (c *counter) PreferPut(int64) bool { return false }

func (c *counter) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return c.put(ctx, c.Bucket.Put, key, r, size)
}

func (c *counter) put(ctx context.Context, put func(context.Context, string, io.Reader, int64) error, key string, r io.Reader, size int64) error {
	c.puts.Add(1)
	c.calls.Add(1)
	return put(ctx, key, r, size)
}

func (c *counter) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	return c.stat(ctx, c.Bucket.Stat, key)
}

func (c *counter) stat(ctx context.Context, stat func(context.Context, string) (driver.ObjectInfo, error), key string) (driver.ObjectInfo, error) {
	c.calls.Add(1)
	info, err := stat(ctx, key)
	if err == nil {
		info.ModTime = info.ModTime.Add(-time.Duration(c.age.Load()))
	}
	return info, err
}

func (c *counter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.calls.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *counter) Delete(ctx context.Context, key string) error {
	c.calls.Add(1)
	return c.Bucket.Delete(ctx, key)
}

func (c *counter) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	c.calls.Add(1)
	return c.Bucket.List(ctx, prefix, fn)
}

// NewBatch wraps the driver's batch, counted and aged as the driver is.
func (c *counter) NewBatch() driver.Batch { return &countingBatch{c: c, b: c.Bucket.NewBatch()} }

type countingBatch struct {
	c *counter
	b driver.Batch
}

func (cb *countingBatch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return cb.c.put(ctx, cb.b.Put, key, r, size)
}

func (cb *countingBatch) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	return cb.c.stat(ctx, cb.b.Stat, key)
}

func (cb *countingBatch) Flush(ctx context.Context) error { return cb.b.Flush(ctx) }

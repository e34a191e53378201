package drivertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// Harness makes the drivers TestBucket runs on; every function is called
// once per subtest, with the subtest's t (so it can register cleanups).
type Harness struct {
	// New returns the driver of a new, empty bucket.
	New func(t *testing.T) driver.Bucket
	// NoBucket returns a driver whose bucket does not exist (never created,
	// or removed after the driver was made).
	NoBucket func(t *testing.T) driver.Bucket
	// Denied returns a driver whose every request the store refuses for
	// lack of permission (credentials a policy denies everything). Where
	// the test cannot make such a store (file permissions, as root), it
	// skips, saying why.
	Denied func(t *testing.T) driver.Bucket
	// Retry is the policy of the buckets of TestObjectStore and
	// TestBlobStore; the zero value makes one attempt (no answer of the
	// driver hidden).
	Retry ledger.RetryPolicy
}

// TestBucket runs every suite of a blob driver: TestObjectStore and
// TestBlobStore on h.New's drivers, TestNoBucket on h.NoBucket's and
// TestPermission on h.Denied's.
func TestBucket(t *testing.T, h Harness) {
	t.Helper()
	p := h.Retry
	if p.Attempts == 0 {
		p = once
	}
	t.Run("ObjectStore", func(t *testing.T) { testObjectStore(t, h.New, p) })
	t.Run("BlobStore", func(t *testing.T) { testBlobStore(t, h.New, p) })
	t.Run("NoBucket", func(t *testing.T) { TestNoBucket(t, h.NoBucket) })
	t.Run("Permission", func(t *testing.T) { TestPermission(t, h.Denied) })
}

// patient is a retry policy that would retry a transient failure: a final
// answer must not be.
var patient = ledger.RetryPolicy{Attempts: 3, Wait: time.Millisecond, MaxWait: time.Millisecond}

// wantRefused runs every operation of a Bucket — keyed and content-addressed,
// on the bucket and on a batch — on the driver newStore returns, and checks
// that each fails with an error wrapping want and none of notWant, after one
// call of the driver: a final answer is not retried.
func wantRefused(t *testing.T, newStore func(t *testing.T) driver.Bucket, want error, notWant ...error) {
	ctx := testContext(t)
	c := &counter{Bucket: newStore(t)}
	b := open(t, c, patient)
	data := []byte("refused")
	d := ledger.DigestOf(data)
	check := func(op string, f func() error) {
		t.Helper()
		before := c.calls.Load()
		err := f()
		if !errors.Is(err, want) {
			t.Errorf("%s = %v, want an error wrapping %v", op, err, want)
		}
		for _, nw := range notWant {
			if errors.Is(err, nw) {
				t.Errorf("%s = %v, which wraps %v: want only %v", op, err, nw, want)
			}
		}
		if n := c.calls.Load() - before; n != 1 {
			t.Errorf("%s made %d calls of the driver, want 1 (a final answer is not retried)", op, n)
		}
	}
	check("PutObject", func() error { return b.PutObject(ctx, "k/o", bytes.NewReader(data), int64(len(data))) })
	check("GetObject", func() error {
		rc, err := b.GetObject(ctx, "k/o")
		if err == nil {
			rc.Close()
		}
		return err
	})
	check("StatObject", func() error { _, err := b.StatObject(ctx, "k/o"); return err })
	check("DeleteObject", func() error { return b.DeleteObject(ctx, "k/o") })
	check("ListObjects", func() error { return b.ListObjects(ctx, "k/", func(ledger.ObjectInfo) error { return nil }) })
	check("blob Stat", func() error { _, err := b.Stat(ctx, d); return err })
	check("blob Get", func() error {
		rc, err := b.Get(ctx, d)
		if err == nil {
			rc.Close()
		}
		return err
	})
	ob := b.NewBatch()
	check("batch PutObject", func() error { return ob.PutObject(ctx, "k/b", bytes.NewReader(data), int64(len(data))) })
	check("batch StatObject", func() error { _, err := ob.StatObject(ctx, "k/b"); return err })
	// A blob put asks first (the counter prefers no put): one call, refused.
	check("blob batch Put", func() error { return b.Batch().Put(ctx, d, bytes.NewReader(data), int64(len(data))) })
}

// TestNoBucket checks a driver whose bucket does not exist (newStore returns
// one): every operation fails with ledger.ErrNoBucket, never ErrNotFound (a
// store configured wrong is not an absent object: a reader must not take
// blobs for missing, nor a lister the store for empty), and is not retried.
func TestNoBucket(t *testing.T, newStore func(t *testing.T) driver.Bucket) {
	t.Helper()
	wantRefused(t, newStore, ledger.ErrNoBucket, ledger.ErrNotFound)
}

// TestPermission checks a driver whose every request the store refuses for
// lack of permission (newStore returns one: S3's AccessDenied, GCS's 403, a
// NATS permission violation, a directory the process may not enter): every
// operation fails with ledger.ErrPermission, never ErrNotFound, and is not
// retried.
func TestPermission(t *testing.T, newStore func(t *testing.T) driver.Bucket) {
	t.Helper()
	wantRefused(t, newStore, ledger.ErrPermission, ledger.ErrNotFound)
}

// errCut is the transient failure of a body cut part way.
var errCut = errors.New("drivertest: connection reset")

// cutter cuts the body of the first get of each key: half of it, then
// errCut (reset) or a clean io.EOF (cleanEOF: a proxy that lost the end).
type cutter struct {
	driver.Bucket
	cleanEOF bool
	mu       sync.Mutex
	cut      map[string]bool
	gets     atomic.Int64
}

func (c *cutter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.gets.Add(1)
	rc, err := c.Bucket.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	first := !c.cut[key]
	c.cut[key] = true
	c.mu.Unlock()
	if !first {
		return rc, nil
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	tail := io.Reader(strings.NewReader(""))
	if !c.cleanEOF {
		tail = iotestErr{errCut}
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(b[:len(b)/2]), tail)), nil
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

// testCutBody: a get's body cut part way by a reset is continued from a new
// get of the driver and reads whole.
func testCutBody(t *testing.T, ctx context.Context, newStore func(t *testing.T) driver.Bucket) {
	c := &cutter{Bucket: newStore(t), cut: map[string]bool{}}
	b := open(t, c, patient)
	data := randomBytes(50, 300_000)
	put(t, ctx, b, "cut/object", data)
	wantContent(t, "GetObject of a body cut part way", get(t, ctx, b, "cut/object"), data)
	if n := c.gets.Load(); n != 2 {
		t.Errorf("%d gets of the driver, want 2 (the cut body continued)", n)
	}
}

// testBlobCutBody: a blob whose body is cut short, with a reset or with a
// clean EOF, never reads as other content: the reset is continued and
// verified, the clean EOF fails with ErrChecksum.
func testBlobCutBody(t *testing.T, ctx context.Context, newStore func(t *testing.T) driver.Bucket) {
	data := randomBytes(51, 200_000)
	for _, clean := range []bool{false, true} {
		c := &cutter{Bucket: newStore(t), cut: map[string]bool{}, cleanEOF: clean}
		b := open(t, c, patient)
		d := putBlob(t, ctx, b, data)
		got, err := ledger.ReadBlob(ctx, b, d)
		switch {
		case clean && !errors.Is(err, ledger.ErrChecksum):
			t.Errorf("ReadBlob of a body cut short with a clean EOF = %d bytes, %v, want ErrChecksum", len(got), err)
		case !clean && err != nil:
			t.Errorf("ReadBlob of a body reset part way = %v, want it continued", err)
		case !clean:
			wantContent(t, "ReadBlob of a body reset part way", got, data)
		}
	}
}

// flaky fails the first put of each key through a batch, as a 503 would.
type flaky struct {
	driver.Bucket
	mu     sync.Mutex
	failed map[string]bool
}

var errFlaky = errors.New("drivertest: 503 slow down")

func (f *flaky) NewBatch() driver.Batch { return &flakyBatch{f: f, Batch: f.Bucket.NewBatch()} }

type flakyBatch struct {
	f *flaky
	driver.Batch
}

func (fb *flakyBatch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	fb.f.mu.Lock()
	first := !fb.f.failed[key]
	fb.f.failed[key] = true
	fb.f.mu.Unlock()
	if first {
		_, _ = io.CopyN(io.Discard, r, 10) // broke after sending a little
		return errFlaky
	}
	return fb.Batch.Put(ctx, key, r, size)
}

// testBlobBatchRetried: a batch's puts are retried under the bucket's policy
// as its own are, the content sent again: after Flush every blob reads back.
func testBlobBatchRetried(t *testing.T, ctx context.Context, newStore func(t *testing.T) driver.Bucket) {
	b := open(t, &flaky{Bucket: newStore(t), failed: map[string]bool{}}, patient)
	bb := b.Batch()
	var ds []ledger.Digest
	for i := range 5 {
		data := randomBytes(uint64(52+i), 1000*i+1)
		d := ledger.DigestOf(data)
		if err := bb.Put(ctx, d, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("batch Put failing once = %v, want it retried", err)
		}
		ds = append(ds, d)
	}
	if err := bb.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	for i, d := range ds {
		wantContent(t, "ReadBlob after a retried batch put", readBlob(t, ctx, b, d), randomBytes(uint64(52+i), 1000*i+1))
	}
}

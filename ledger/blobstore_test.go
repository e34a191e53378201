package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
)

// preferring is a file driver that prefers puts for small objects, counting
// the existence checks and puts it is asked for.
type preferring struct {
	driver.Bucket
	stats, puts atomic.Int64
}

func (p *preferring) PreferPut(size int64) bool { return size >= 0 && size <= 100 }

func (p *preferring) Stat(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	p.stats.Add(1)
	return p.Bucket.Stat(ctx, key)
}

func (p *preferring) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	p.puts.Add(1)
	return p.Bucket.Put(ctx, key, r, size)
}

// A driver that prefers puts gets one request per Put of a small blob (no
// existence check), present or not, under the retry policy; a large blob is
// checked first and not sent again while young.
func TestPutPreferrer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := &preferring{Bucket: fs}
	bs := ledger.NewBucket(p, ledger.RetryPolicy{})
	small, large := []byte("small"), bytes.Repeat([]byte("L"), 1000)
	for range 2 {
		for _, b := range [][]byte{small, large} {
			if err := bs.Put(ctx, ledger.DigestOf(b), bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// small: 2 puts, no stat; large: 2 stats, 1 put.
	if s, n := p.stats.Load(), p.puts.Load(); s != 2 || n != 3 {
		t.Fatalf("%d existence checks and %d puts, want 2 and 3", s, n)
	}
	for _, b := range [][]byte{small, large} {
		got, err := ledger.ReadBlob(ctx, bs, ledger.DigestOf(b))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("read back: %v", err)
		}
	}
}

// closes counts its driver's Close calls.
type closes struct {
	driver.Bucket
	n atomic.Int64
}

func (c *closes) Close() error { c.n.Add(1); return c.Bucket.Close() }

// A closed bucket refuses every operation with ErrClosed, and closes its
// driver once however often it is closed.
func TestBucketClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := &closes{Bucket: fs}
	bs := ledger.NewBucket(c, ledger.RetryPolicy{})
	d, err := ledger.PutBytes(ctx, bs, []byte("before"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := bs.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("the driver was closed %d times, want 1", n)
	}
	for op, err := range map[string]error{
		"PutObject":    bs.PutObject(ctx, "k", bytes.NewReader(nil), 0),
		"Put":          bs.Put(ctx, d, bytes.NewReader([]byte("before")), 6),
		"DeleteObject": bs.DeleteObject(ctx, "k"),
		"Delete":       bs.Delete(ctx, d),
		"ListObjects":  bs.ListObjects(ctx, "", func(ledger.ObjectInfo) error { return nil }),
		"List":         bs.List(ctx, func(ledger.Digest, ledger.ObjectInfo) error { return nil }),
		"batch Put":    bs.Batch().Put(ctx, d, bytes.NewReader([]byte("before")), 6),
		"batch Flush":  bs.Batch().Flush(ctx),
	} {
		if !errors.Is(err, ledger.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", op, err)
		}
	}
	if _, err := bs.GetObject(ctx, "k"); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("GetObject after Close = %v, want ErrClosed", err)
	}
	if _, err := bs.Get(ctx, d); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := bs.StatObject(ctx, "k"); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("StatObject after Close = %v, want ErrClosed", err)
	}
	if _, err := bs.Stat(ctx, d); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Stat after Close = %v, want ErrClosed", err)
	}
}

package ledger_test

import (
	"bytes"
	"context"
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

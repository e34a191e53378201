package drivertest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
)

// testBlobBatch: blobs put through a batch at once — new ones, one stored
// before, the same content twice — read back verified after Flush; a blob
// stored before is taken as stored only after it read back (no second put).
func testBlobBatch(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	before := randomBytes(60, 7_000)
	dBefore := putBlob(t, ctx, bs, before)
	contents := [][]byte{before, randomBytes(61, 0), randomBytes(62, 100), randomBytes(63, 300_000)}
	for i := range 20 {
		contents = append(contents, randomBytes(uint64(70+i), 50*i+1))
	}
	contents = append(contents, contents[5]) // the same content twice
	puts := c.puts.Load()
	b := bs.Batch()
	var g errgroup.Group
	for _, c := range contents {
		g.Go(func() error { return b.Put(ctx, ledger.DigestOf(c), bytes.NewReader(c), int64(len(c))) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("batch Put = %v", err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	for _, c := range contents {
		wantContent(t, "ReadBlob after Flush", readBlob(t, ctx, bs, ledger.DigestOf(c)), c)
	}
	if n := c.puts.Load() - puts; n < int64(len(contents)-2) || n > int64(len(contents)-1) {
		t.Errorf("a batch of %d blobs, one stored before and one content twice, made %d PutObject calls, want %d or %d",
			len(contents), n, len(contents)-2, len(contents)-1)
	}
	wantContent(t, "ReadBlob of the blob stored before", readBlob(t, ctx, bs, dBefore), before)
}

// testBlobBatchOverSquattedKey: other bytes under a blob's key, stored before
// the batch or beside it after it first looked at the key's directory, are
// never taken for the blob: after Flush it reads as its content (issue 26).
func testBlobBatchOverSquattedKey(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	b := bs.Batch()
	for i, n := range []int{10, 300_000} {
		data := randomBytes(uint64(80+n), n)
		d := ledger.DigestOf(data)
		if i == 1 {
			// The batch looks at the directory first, then the squatter puts.
			if err := b.Put(ctx, ledger.DigestOf([]byte{1}), bytes.NewReader([]byte{1}), 1); err != nil {
				t.Fatal(err)
			}
		}
		put(t, ctx, bs, ledger.BlobKey(d), bytes.Repeat([]byte{'z'}, n))
		if err := b.Put(ctx, d, bytes.NewReader(data), int64(n)); err != nil {
			t.Fatalf("batch Put over a squatted key = %v", err)
		}
		defer func() {
			wantContent(t, "ReadBlob after a batch put over a squatted key", readBlob(t, ctx, bs, d), data)
		}()
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
}

// testBlobBatchMismatch: content that does not hash to its digest fails its
// batch Put with ErrChecksum and leaves no blob under the digest.
func testBlobBatchMismatch(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	right := randomBytes(90, 5000)
	d := ledger.DigestOf(right)
	wrong := bytes.Clone(right)
	wrong[100] ^= 1
	b := bs.Batch()
	if err := b.Put(ctx, d, bytes.NewReader(wrong), int64(len(wrong))); !errors.Is(err, ledger.ErrChecksum) {
		t.Errorf("batch Put(content not hashing to d) = %v, want ErrChecksum", err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	wantBlobAbsent(t, ctx, bs, d)
}

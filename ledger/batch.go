package ledger

import (
	"context"
	"fmt"
	"io"

	"github.com/syncledger/syncledger/ledger/driver"
)

// ObjectBatch puts objects whose durability is settled together: a commit's
// blobs, made durable once before the events that name them are published,
// rather than one at a time (on the driver's batch, driver.Batch: one
// directory fsync per directory touched for ledger/fileblob, the metadata
// acknowledgements awaited together for ledger/natsblob, the puts as they are
// for S3 and GCS, which acknowledge a put once it is durable).
//
// PutObject stores the object as Bucket.PutObject does (it reads r to EOF; a
// failed put leaves nothing, or the previous object, visible; the object is
// never visible in part), but the object is durable — it survives a crash or
// a power cut of the store's machine — only once Flush has returned nil, and
// visible to other readers of the store by then at the latest. Until then it
// may vanish, whole. A caller publishes nothing that names an object of the
// batch before Flush returns nil; if Flush fails, none of the batch's objects
// may be relied on.
//
// StatObject is Bucket.StatObject, which sees the batch's own puts and which
// the batch may answer from what it has already read of the store (a listing
// of the key's directory): an absent key may then cost no request or syscall.
// Its answer is a hint, never proof of content: presence is trusted only once
// the stored content reads back as it must (BlobBatch does this). An object it
// finds present is durable once Flush returns nil, as the batch's own puts
// are: it may have been put by a batch never flushed (a commit that failed
// before its publish), whose names a power cut can still take
// (ledger/fileblob syncs its directory at Flush).
//
// Puts and stats are checked and retried as the Bucket's are; Flush is not
// retried (see RetryPolicy). A batch is safe for concurrent use. It is not
// reused after Flush: a new batch for the next group.
type ObjectBatch struct {
	b *Bucket
	d driver.Batch
}

// NewBatch returns a new batch of puts on the bucket (ObjectBatch).
func (b *Bucket) NewBatch() *ObjectBatch { return &ObjectBatch{b: b, d: b.d.NewBatch()} }

// PutObject stores r under key, durable once Flush returns nil.
func (ob *ObjectBatch) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ob.b.check(ctx, opPut, key); err != nil {
		return err
	}
	return ob.b.put(ctx, ob.d.Put, key, r, size, nil)
}

// StatObject returns the object's info, as far as the batch knows it.
func (ob *ObjectBatch) StatObject(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ob.b.check(ctx, opStat, key); err != nil {
		return ObjectInfo{}, err
	}
	return ob.b.stat(ctx, ob.d.Stat, key)
}

// Flush makes every object the batch put (or found present) durable.
func (ob *ObjectBatch) Flush(ctx context.Context) error {
	if ob.b.closed.Load() {
		return fmt.Errorf("flush batch: %w", ErrClosed)
	}
	return ob.d.Flush(ctx)
}

// BlobBatch stores blobs whose durability is settled together (see
// ObjectBatch): Put keeps Bucket.Put's contract — idempotent, verified, a
// present blob trusted only once it reads back as its digest — except that a
// blob is durable only once Flush has returned nil. Publish nothing that
// names a blob of the batch before that. Safe for concurrent use.
type BlobBatch struct{ ob *ObjectBatch }

// Batch returns a batch of blob puts made durable together, at its Flush: a
// bulk commit's blobs, before anything names them.
func (b *Bucket) Batch() *BlobBatch { return &BlobBatch{b.NewBatch()} }

// Put stores the blob d, durable once Flush returns nil.
func (bb *BlobBatch) Put(ctx context.Context, d Digest, r io.Reader, size int64) error {
	return bb.ob.b.putBlob(ctx, bb.ob.d.Put, bb.ob.d.Stat, d, r, size)
}

// Flush makes every blob of the batch durable.
func (bb *BlobBatch) Flush(ctx context.Context) error { return bb.ob.Flush(ctx) }

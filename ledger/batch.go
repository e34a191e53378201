package ledger

import (
	"context"
	"io"
)

// ObjectBatch puts objects whose durability is settled together: a commit's
// blobs, made durable once before the events that name them are published,
// rather than one at a time.
//
// PutObject stores the object as ObjectStore.PutObject does (it reads r to
// EOF; a failed put leaves nothing, or the previous object, visible; the
// object is never visible in part), but the object is durable — it survives a
// crash or a power cut of the store's machine — only once Flush has returned
// nil, and visible to other readers of the store by then at the latest. Until
// then it may vanish, whole. A caller publishes nothing that names an object
// of the batch before Flush returns nil; if Flush fails, none of the batch's
// objects may be relied on.
//
// StatObject is ObjectStore.StatObject, which sees the batch's own puts and
// which the batch may answer from what it has already read of the store (a
// listing of the key's directory): an absent key may then cost no request or
// syscall. Its answer is a hint, never proof of content: presence is trusted
// only once the stored content reads back as it must (BlobBatch does this).
// An object it finds present is durable once Flush returns nil, as the
// batch's own puts are: it may have been put by a batch never flushed (a
// commit that failed before its publish), whose names a power cut can still
// take (ledger/fileblob syncs its directory at Flush).
//
// A batch is safe for concurrent use. It is not reused after Flush: a new
// batch for the next group.
type ObjectBatch interface {
	PutObject(ctx context.Context, key string, r io.Reader, size int64) error
	StatObject(ctx context.Context, key string) (ObjectInfo, error)
	Flush(ctx context.Context) error
}

// Batcher is implemented by an ObjectStore whose batch is cheaper than its
// durable puts one at a time (ledger/fileblob: one directory fsync per directory
// touched at Flush instead of one per object; ledger/natsblob: the metadata
// acknowledgements awaited together at Flush). Wrappers of an ObjectStore
// forward it.
type Batcher interface {
	NewBatch() ObjectBatch
}

// NewObjectBatch returns a batch of objs: the store's own (Batcher), or one
// whose every put is durable when it returns (the ObjectStore contract), so
// that its Flush has nothing left to do.
func NewObjectBatch(objs ObjectStore) ObjectBatch {
	if b, ok := objs.(Batcher); ok {
		return b.NewBatch()
	}
	return DurableEach(objs)
}

// DurableEach returns the batch of a store whose PutObject is durable when it
// returns — S3 and GCS acknowledge a put once it is stored durably, so their
// natural batch is their puts as they are, as many at once as the caller runs.
func DurableEach(objs ObjectStore) ObjectBatch { return eachDurable{objs} }

type eachDurable struct{ objs ObjectStore }

func (b eachDurable) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	return b.objs.PutObject(ctx, key, r, size)
}

func (b eachDurable) StatObject(ctx context.Context, key string) (ObjectInfo, error) {
	return b.objs.StatObject(ctx, key)
}

func (b eachDurable) Flush(ctx context.Context) error { return ctx.Err() }

// BlobBatch stores blobs whose durability is settled together (see
// ObjectBatch): Put keeps BlobStore.Put's contract — idempotent, verified,
// a present blob trusted only once it reads back as its digest — except that
// a blob is durable only once Flush has returned nil. Publish nothing that
// names a blob of the batch before that. Safe for concurrent use.
type BlobBatch interface {
	Put(ctx context.Context, d Digest, r io.Reader, size int64) error
	Flush(ctx context.Context) error
}

type blobBatch struct {
	s    *blobStore
	objs ObjectBatch
}

func (b *blobBatch) Put(ctx context.Context, d Digest, r io.Reader, size int64) error {
	return b.s.put(ctx, b.objs, d, r, size)
}

func (b *blobBatch) Flush(ctx context.Context) error { return b.objs.Flush(ctx) }

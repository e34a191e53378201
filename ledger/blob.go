package ledger

import (
	"context"
	"io"
	"time"
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string // relative to the store's root (its URL prefix)
	Size    int64
	ModTime time.Time
}

// ObjectStore is the plain key/value storage each backend (file, s3, gcs, natsblob)
// provides. Keys are slash-separated and relative to the backend's configured root.
// BlobStore builds content addressing and verification on top of it; snapshots and
// other keyed objects use it directly.
type ObjectStore interface {
	// PutObject stores r (size bytes; -1 if unknown) under key, reading r to EOF.
	// The object becomes visible only once complete; if r returns an error the put
	// fails and nothing (or the previous object) is visible.
	PutObject(ctx context.Context, key string, r io.Reader, size int64) error
	// GetObject opens the object; ErrNotFound if absent.
	GetObject(ctx context.Context, key string) (io.ReadCloser, error)
	// StatObject returns the object's info; ErrNotFound if absent.
	StatObject(ctx context.Context, key string) (ObjectInfo, error)
	// DeleteObject removes the object; deleting an absent object is not an error.
	DeleteObject(ctx context.Context, key string) error
	// ListObjects calls fn for every object whose key starts with prefix, in
	// lexical key order.
	ListObjects(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}

// PutPreferrer is an optional interface of an ObjectStore for which storing an
// object of the given size again costs less than asking whether it exists — a
// remote store, where that is one request instead of two. BlobStore.Put skips
// its existence check for such objects (storing identical content under its
// own address is harmless, and leaves the blob young for blob GC). Wrappers of
// an ObjectStore forward it.
type PutPreferrer interface {
	PreferPut(size int64) bool
}

// PreferPut reports whether objs prefers a put to an existence check for an
// object of size bytes (see PutPreferrer).
func PreferPut(objs ObjectStore, size int64) bool {
	p, ok := objs.(PutPreferrer)
	return ok && p.PreferPut(size)
}

// BlobStore is content-addressed storage of file content by SHA-256.
type BlobStore interface {
	// Put stores the content read from r under d. Put is idempotent: if the blob
	// exists, was stored less than BlobRefreshAge ago and reads back as d, it is
	// not uploaded again (an older one is, to make it young for blob GC). If the content read
	// does not hash to d the put fails with ErrChecksum and no blob is stored
	// under d.
	Put(ctx context.Context, d Digest, r io.Reader, size int64) error
	// Batch returns a batch of puts made durable together, at its Flush
	// (BlobBatch): a bulk commit's blobs, before anything names them.
	Batch() BlobBatch
	// Get opens the blob. The reader verifies the content: a read that reaches the
	// end of content not matching d fails with ErrChecksum instead of io.EOF, so a
	// caller that reads to EOF never accepts wrong content. ErrNotFound if absent.
	Get(ctx context.Context, d Digest) (io.ReadCloser, error)
	// Stat returns the blob's info; ErrNotFound if absent.
	Stat(ctx context.Context, d Digest) (ObjectInfo, error)
	// Delete removes the blob; absent is not an error.
	Delete(ctx context.Context, d Digest) error
	// List calls fn for every stored blob with its digest.
	List(ctx context.Context, fn func(Digest, ObjectInfo) error) error
	// Objects returns the object store the blobs live in: keyed objects
	// (snapshots) live there beside them.
	Objects() ObjectStore
}

// Package driver holds the small interfaces the ledger's portable types are
// built over, after go-cloud's blob/driver: what one backend must do, and
// nothing that every backend must do the same way. Its capabilities are
// methods every driver implements, some trivially — never optional interfaces
// found by type assertion.
//
// Bucket is the driver of ledger.Bucket, the one portable type of the ledger's
// object storage: ledger.NewBucket(d, policy) checks keys, prefixes, the
// context and the closed state once, maps a driver's errors through its
// ErrorCode, retries under one policy, batches, and stores and verifies
// content by its SHA-256. A driver does none of that again: it is called only
// with valid keys and a live context, makes one attempt per call, and leaves
// what its errors mean to ErrorCode. The conformance suite every driver runs is
// ledger/drivertest; a driver outside this module can run it too.
//
// This package imports only the standard library, so that package ledger can
// import it.
package driver

import (
	"context"
	"io"
	"strconv"
	"time"
)

// ObjectInfo describes one stored object (ledger.ObjectInfo is this type).
type ObjectInfo struct {
	Key     string // relative to the store's root (its URL prefix)
	Size    int64
	ModTime time.Time
}

// ErrorCode classifies a driver's error for the portable type: which
// sentinel of package ledger it wraps, and whether trying again can help.
type ErrorCode int

const (
	// Unknown: anything else — a 5xx answer, a reset connection, a timeout.
	// It may be transient: the portable type retries it under its policy.
	Unknown ErrorCode = iota
	// NotFound: the object does not exist (ledger.ErrNotFound).
	NotFound
	// NoBucket: the bucket, directory or stream the store lives in does not
	// exist (ledger.ErrNoBucket): a configuration error, never an absent
	// object. Not retried.
	NoBucket
	// PermissionDenied: the store refused the operation for lack of
	// permission (ledger.ErrPermission). Not retried.
	PermissionDenied
	// Invalid: the store refused the request as malformed for it, such as a
	// key it reserves (ledger.ErrInvalid). Not retried.
	Invalid
	// Refused: the store answered, and would answer the same again, without
	// one of the meanings above (an HTTP 4xx other than 403, 404, 408 and
	// 429). Not retried; no sentinel.
	Refused
)

var codeNames = [...]string{"unknown", "not found", "no such bucket", "permission denied", "invalid", "refused"}

func (c ErrorCode) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "ErrorCode(" + strconv.Itoa(int(c)) + ")"
}

// Bucket is one backend's object storage: keys are slash-separated and
// relative to the backend's configured root. The portable type calls it only
// with keys ledger.ValidateKey accepts and prefixes ledger.ValidatePrefix
// accepts, and with a context not yet done. Every method makes one attempt:
// retrying is the portable type's. A Bucket is safe for concurrent use.
type Bucket interface {
	// Put stores the content read from r (size bytes; -1 if unknown) under
	// key. It reads r to io.EOF before it makes the object visible, and
	// makes it visible only whole: if reading r fails, or the put fails,
	// nothing (or the previous object) is visible. The object is durable
	// when Put returns nil. (The portable type's reader fails instead of
	// returning io.EOF when the content's length differs from size or the
	// context ends, so a driver that commits only after io.EOF never commits
	// content of the wrong length.)
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object for reading; its reader may be read after Get
	// returns, until Close, under ctx.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat returns the object's info.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes the object. Deleting an absent object, or a key that
	// names no object (a prefix of other keys), is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix, in
	// lexical key order (Go's string order), and returns fn's error as it
	// is. It may list keys ledger.ValidateKey refuses (objects another
	// writer put beside the store): the portable type skips them.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// NewBatch returns a batch of puts whose durability is settled together
	// (see Batch). A store whose Put is durable when it returns and that
	// has nothing cheaper returns DurableEach(itself).
	NewBatch() Batch
	// PreferPut reports whether storing an object of size bytes again costs
	// less than asking whether it exists: a remote store, where that is one
	// request instead of two. The portable type's content-addressed put
	// skips its existence check for such objects.
	PreferPut(size int64) bool
	// ErrorCode classifies an error one of the other methods returned.
	ErrorCode(err error) ErrorCode
	// Close releases what the driver holds (a client's connections). The
	// portable type calls it once, and no other method after it.
	Close() error
}

// Batch puts objects whose durability is settled together: a commit's blobs,
// made durable once before the events that name them are published, rather
// than one at a time. It is safe for concurrent use, and not reused after
// Flush.
//
// Put stores the object as Bucket.Put does (it reads r to io.EOF; a failed
// put leaves nothing, or the previous object, visible; the object is never
// visible in part), but the object is durable — it survives a crash or a
// power cut of the store's machine — only once Flush has returned nil, and
// visible to other readers of the store by then at the latest. Until then it
// may vanish, whole.
//
// Stat is Bucket.Stat, which sees the batch's own puts and which the batch may
// answer from what it has already read of the store (a listing of the key's
// directory): an absent key may then cost no request. Its answer is a hint,
// never proof of content. An object it finds present is durable once Flush
// returns nil, as the batch's own puts are.
type Batch interface {
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	Flush(ctx context.Context) error
}

// DurableEach returns the batch of a bucket whose Put is durable when it
// returns (S3 and GCS acknowledge a put once it is stored durably): its puts
// as they are, as many at once as the caller runs, and a Flush with nothing
// left to do.
func DurableEach(b Bucket) Batch { return eachDurable{b} }

type eachDurable struct{ b Bucket }

func (e eachDurable) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return e.b.Put(ctx, key, r, size)
}

func (e eachDurable) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	return e.b.Stat(ctx, key)
}

func (e eachDurable) Flush(ctx context.Context) error { return ctx.Err() }

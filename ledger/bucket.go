package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/syncledger/syncledger/ledger/driver"
)

// ObjectInfo describes one stored object.
type ObjectInfo = driver.ObjectInfo

// Bucket is the ledger's object storage, the one portable type over every
// backend's driver (ledger/driver.Bucket: ledger/fileblob, ledger/s3blob,
// ledger/gcsblob, ledger/natsblob): the blob store, content-addressed by
// SHA-256 (Put, Get, Stat, Delete, List, Batch), and, beside the blobs, keyed
// objects (PutObject, GetObject, StatObject, DeleteObject, ListObjects,
// NewBatch): the ledger's snapshots, and swamp's datastores.
//
// It does once what every backend must do, so that no driver does it again:
//
//   - checks every key (ValidateKey) and list prefix (ValidatePrefix), the
//     context, and the closed state, before the driver is called;
//   - maps the driver's errors through its ErrorCode to the ledger's
//     sentinels (ErrNotFound, ErrNoBucket, ErrPermission, ErrInvalid), and
//     makes an error caused by the context's end wrap the context's error;
//   - reads a put's content through a reader that fails, instead of
//     returning io.EOF, when the content's length differs from its declared
//     size or the context ends, and keeps the content's own read error as the
//     put's;
//   - retries under its one RetryPolicy (see there for the bounds);
//   - stores content under its digest and verifies it both ways (Put, Get);
//   - batches (Batch, NewBatch) on the driver's batch.
//
// Keys are slash-separated and relative to the backend's configured root. A
// Bucket is safe for concurrent use.
type Bucket struct {
	d      driver.Bucket
	p      RetryPolicy
	closed atomic.Bool
	once   sync.Once
	cerr   error
}

// NewBucket returns the Bucket over the driver d, retrying under p (the zero
// RetryPolicy is the default policy; RetryPolicy{Attempts: 1} retries
// nothing).
func NewBucket(d driver.Bucket, p RetryPolicy) *Bucket {
	return &Bucket{d: d, p: p.withDefaults()}
}

// View returns a bucket over wrap(the driver of b), with b's retry policy: a
// view of the same storage that filters or rewrites what the driver does
// (after go-cloud's PrefixedBucket). It shares b's driver: closing either
// closes it.
func (b *Bucket) View(wrap func(driver.Bucket) driver.Bucket) *Bucket {
	return &Bucket{d: wrap(b.d), p: b.p}
}

// WithRetry returns a bucket over b's driver retrying under p instead (the
// zero RetryPolicy is the default policy): a caller that bounds its own
// operations (a host's push, from its Policy) takes the same storage under
// its own bounds. It shares b's driver: closing either closes it.
func (b *Bucket) WithRetry(p RetryPolicy) *Bucket {
	return &Bucket{d: b.d, p: p.withDefaults()}
}

// Retry returns the bucket's retry policy, its defaults filled in.
func (b *Bucket) Retry() RetryPolicy { return b.p }

// Close closes the driver (a client's connections). Every operation after it
// fails with ErrClosed. Closing again returns the first Close's error.
func (b *Bucket) Close() error {
	b.once.Do(func() {
		b.closed.Store(true)
		b.cerr = b.d.Close()
	})
	return b.cerr
}

// The operations' names, which begin their errors.
const (
	opPut    = "put object"
	opGet    = "get object"
	opStat   = "stat object"
	opDelete = "delete object"
	opList   = "list objects"
)

// check is every keyed operation's preamble: the bucket open, the key valid,
// the context live.
func (b *Bucket) check(ctx context.Context, op, key string) error {
	return b.preamble(ctx, op, key, ValidateKey)
}

// preamble is check with valid checking key (a list's prefix: ValidatePrefix).
func (b *Bucket) preamble(ctx context.Context, op, key string, valid func(string) error) error {
	if b.closed.Load() {
		return fmt.Errorf("%s %q: %w", op, key, ErrClosed)
	}
	if err := valid(key); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w", op, key, err)
	}
	return nil
}

// live is the preamble of an operation on a key known valid (a blob's).
func (b *Bucket) live(ctx context.Context, op, key string) error {
	if b.closed.Load() {
		return fmt.Errorf("%s %q: %w", op, key, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w", op, key, err)
	}
	return nil
}

// sentinel is the ledger's error a driver's error code means.
func sentinel(c driver.ErrorCode) error {
	switch c {
	case driver.NotFound:
		return ErrNotFound
	case driver.NoBucket:
		return ErrNoBucket
	case driver.PermissionDenied:
		return ErrPermission
	case driver.Invalid:
		return ErrInvalid
	}
	return nil
}

// BucketError is a Bucket's error of one operation of its driver on one key
// (or a list's prefix): it wraps the driver's error, the sentinel the
// driver's error code means, and the context's error when the context's end
// caused it. Its message is formatted only when read: most of a commit's
// stats answer that a new blob is absent.
type BucketError struct {
	Op  string // "put object", "get object", "stat object", "delete object", "list objects"
	Key string // the key, or the list's prefix
	Err error  // the driver's error, or the content's
	is  error  // the code's sentinel, unless Err wraps it already
	ctx error  // the context's, unless Err wraps it already
	// tries says which attempt failed for good, if not the first.
	tries string
}

func (e *BucketError) Error() string {
	var s strings.Builder
	s.WriteString(e.Op)
	s.WriteByte(' ')
	s.WriteString(strconv.Quote(e.Key))
	s.WriteString(": ")
	if e.ctx != nil {
		s.WriteString(e.ctx.Error())
		s.WriteString(": ")
	}
	if e.tries != "" {
		s.WriteString(e.tries)
		s.WriteString(": ")
	}
	if e.is != nil {
		s.WriteString(e.is.Error())
		s.WriteString(" (")
		s.WriteString(e.Err.Error())
		s.WriteByte(')')
	} else {
		s.WriteString(e.Err.Error())
	}
	return s.String()
}

// Unwrap returns the driver's error (or the content's).
func (e *BucketError) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel the driver's error code means,
// or the context's error that caused the failure (errors.Is follows Err
// itself). It allocates nothing: most of a commit's stats are answered "not
// found", and asked so.
func (e *BucketError) Is(target error) bool {
	return target != nil && (target == e.is || target == e.ctx)
}

// fail returns the error of op on key that failed with err, whose code is
// code.
func fail(ctx context.Context, op, key string, code driver.ErrorCode, err error, tries string) error {
	e := &BucketError{Op: op, Key: key, Err: err, tries: tries}
	if s := sentinel(code); s != nil && !errors.Is(err, s) {
		e.is = s
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		e.ctx = cerr
	}
	return e
}

// PutObject stores r (size bytes; -1 if unknown) under key, reading r to EOF.
// The object becomes visible only once complete; if r returns an error the put
// fails with it and nothing (or the previous object) is visible. The object
// is durable when PutObject returns nil.
func (b *Bucket) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := b.check(ctx, opPut, key); err != nil {
		return err
	}
	return b.put(ctx, b.d.Put, key, r, size, nil)
}

// GetObject opens the object; ErrNotFound if absent. A body that fails part
// way is continued from a new get (see RetryPolicy).
func (b *Bucket) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := b.check(ctx, opGet, key); err != nil {
		return nil, err
	}
	return b.getResumed(ctx, key)
}

// StatObject returns the object's info; ErrNotFound if absent.
func (b *Bucket) StatObject(ctx context.Context, key string) (ObjectInfo, error) {
	if err := b.check(ctx, opStat, key); err != nil {
		return ObjectInfo{}, err
	}
	return b.stat(ctx, b.d.Stat, key)
}

// stat asks stat (the driver's, or a batch's) about key, retrying.
func (b *Bucket) stat(ctx context.Context, stat func(context.Context, string) (ObjectInfo, error), key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := b.do(ctx, opStat, key, func(ctx context.Context) error {
		var err error
		info, err = stat(ctx, key)
		return err
	})
	return info, err
}

// DeleteObject removes the object; deleting an absent object is not an
// error.
func (b *Bucket) DeleteObject(ctx context.Context, key string) error {
	if err := b.check(ctx, opDelete, key); err != nil {
		return err
	}
	return b.delete(ctx, key)
}

func (b *Bucket) delete(ctx context.Context, key string) error {
	err := b.do(ctx, opDelete, key, func(ctx context.Context) error { return b.d.Delete(ctx, key) })
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// ListObjects calls fn for every object whose key starts with prefix, in
// lexical key order, and returns fn's error as it is. Objects whose keys
// ValidateKey refuses (put beside the store by another writer) are not
// listed. A list that fails part way is listed again from the start,
// skipping the keys already passed to fn.
func (b *Bucket) ListObjects(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := b.preamble(ctx, opList, prefix, ValidatePrefix); err != nil {
		return err
	}
	var (
		last  string
		fnErr error
	)
	err := b.do(ctx, opList, prefix, func(ctx context.Context) error {
		return b.d.List(ctx, prefix, func(info ObjectInfo) error {
			if last != "" && info.Key <= last {
				return nil // passed to fn by an earlier attempt
			}
			if !validKey(info.Key) {
				return nil // not an object this store could have written
			}
			if fnErr = fn(info); fnErr != nil {
				return final{fnErr}
			}
			last = info.Key
			return nil
		})
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

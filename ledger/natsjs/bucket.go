package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// BucketKV is a ledger side bucket as a ledger.KV, opened (and checked, see
// openKVBucket) on first use, so a command that only writes one value pays
// one round trip: until the bucket is open, a Put is one publish to the key's
// subject, which is what a put sends, and only when no bucket answers is the
// bucket opened (to say why: a missing bucket is a *ledger.ConfigError
// naming the admin's upgrade, which creates it). A ledger that does not exist
// is an error wrapping ledger.ErrNotFound.
// Opened through a Client, an operation the server refuses fails at once
// with a *ledger.PermissionError rather than wait for its timeout. It is
// safe for concurrent use.
type BucketKV struct {
	js             jetstream.JetStream
	ledger, bucket string
	watches        *watches // a Client's refusal routing; nil on a bare connection

	mu sync.Mutex
	kv *KV
}

var _ ledger.KV = (*BucketKV)(nil)

// HeartbeatKV returns the bucket of the ledger's host heartbeats
// (HeartbeatBucket). Of opts, WithTimeout applies.
func HeartbeatKV(nc *nats.Conn, ledgerName string, opts ...Option) (*BucketKV, error) {
	return newBucketKV(nc, ledgerName, HeartbeatBucket(ledgerName), opts)
}

func newBucketKV(nc *nats.Conn, ledgerName, bucket string, opts []Option) (*BucketKV, error) {
	l, err := newLog(nc, ledgerName, opts)
	if err != nil {
		return nil, err
	}
	return &BucketKV{js: l.js, ledger: ledgerName, bucket: bucket}, nil
}

// open opens the bucket now.
func (b *BucketKV) open(ctx context.Context) (*KV, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	kv, err := openKVBucket(ctx, b.js, b.ledger, b.bucket)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s of ledger %q: %w", b.bucket, b.ledger, err)
	}
	b.kv = newKV(b.js.Conn(), kv, b.js.Options().DefaultTimeout)
	return b.kv, nil
}

func (b *BucketKV) opened() *KV {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kv
}

// put sets the key's value: before the bucket is open, by one publish.
func (b *BucketKV) put(ctx context.Context, key string, value []byte) (uint64, error) {
	if kv := b.opened(); kv != nil {
		return kv.Put(ctx, key, value)
	}
	// No retry on no responders (the client's default waits 2 × 250 ms): no
	// answer means no bucket, or a blip, and both take the Open and Put
	// below, whose open says which and whose put retries on its own.
	ack, err := b.js.Publish(ctx, KVSubjectPrefix+b.bucket+"."+key, value, jetstream.WithRetryAttempts(0))
	if err == nil {
		return ack.Sequence, nil
	}
	if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
		return 0, (&KV{nc: b.js.Conn()}).mapErr("put", key, err)
	}
	kv, err := b.open(ctx)
	if err != nil {
		return 0, err
	}
	return kv.Put(ctx, key, value)
}

// bucketOp opens the bucket and runs op on it, under the refusal watch of
// the bucket's subjects.
func bucketOp[T any](ctx context.Context, b *BucketKV, op func(context.Context, *KV) (T, error)) (T, error) {
	return guarded(b.watches, bucketSubjects(b.bucket), ctx, func(ctx context.Context) (T, error) {
		kv, err := b.open(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		return op(ctx, kv)
	})
}

// Open opens the bucket now.
func (b *BucketKV) Open(ctx context.Context) (*KV, error) {
	return bucketOp(ctx, b, func(_ context.Context, kv *KV) (*KV, error) { return kv, nil })
}

// Put sets the key's value: before the bucket is open, by one publish.
func (b *BucketKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return guarded(b.watches, bucketSubjects(b.bucket), ctx, func(ctx context.Context) (uint64, error) {
		return b.put(ctx, key, value)
	})
}

func (b *BucketKV) Get(ctx context.Context, key string) (ledger.KVEntry, error) {
	return bucketOp(ctx, b, func(ctx context.Context, kv *KV) (ledger.KVEntry, error) { return kv.Get(ctx, key) })
}

func (b *BucketKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return bucketOp(ctx, b, func(ctx context.Context, kv *KV) (uint64, error) { return kv.Create(ctx, key, value) })
}

func (b *BucketKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	return bucketOp(ctx, b, func(ctx context.Context, kv *KV) (uint64, error) { return kv.Update(ctx, key, value, last) })
}

func (b *BucketKV) Delete(ctx context.Context, key string, last uint64) error {
	_, err := bucketOp(ctx, b, func(ctx context.Context, kv *KV) (struct{}, error) { return struct{}{}, kv.Delete(ctx, key, last) })
	return err
}

func (b *BucketKV) List(ctx context.Context, prefix string) ([]ledger.KVEntry, error) {
	return bucketOp(ctx, b, func(ctx context.Context, kv *KV) ([]ledger.KVEntry, error) { return kv.List(ctx, prefix) })
}

// PurgeKey removes the key's values up to revision upTo (0: all of them) by
// a purge of the bucket's stream filtered to the key's subject — a request
// only the admin role may send (natsauth denies every purge below it), where
// Delete is a marker any writer of the bucket may put. A value stored after
// upTo is kept. A refused purge is a *ledger.PermissionError.
func (b *BucketKV) PurgeKey(ctx context.Context, key string, upTo uint64) error {
	_, err := guarded(b.watches, bucketSubjects(b.bucket), ctx, func(ctx context.Context) (struct{}, error) {
		kv, err := b.open(ctx)
		if err != nil {
			return struct{}{}, err
		}
		s, err := b.js.Stream(ctx, KVStream(b.bucket))
		if err != nil {
			return struct{}{}, kv.mapErr("purge", key, err)
		}
		opts := []jetstream.StreamPurgeOpt{jetstream.WithPurgeSubject(KVSubjectPrefix + b.bucket + "." + key)}
		if upTo > 0 {
			opts = append(opts, jetstream.WithPurgeSequence(upTo+1))
		}
		return struct{}{}, kv.mapErr("purge", key, s.Purge(ctx, opts...))
	})
	return err
}

package natsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// NewBatch implements driver.Bucket. A put sends its chunks and waits for
// their acknowledgements, as PutObject does — an object's metadata never
// names chunks the stream has not stored — then publishes its metadata
// without waiting; Flush waits for every metadata acknowledgement at once. A
// put of a small object is one round trip instead of two, and a put of a blob
// key the batch's StatObject just found absent does not ask again (BlobBatch
// asks first). The batch's StatObject of a key it put waits for that key's
// acknowledgement first. Its StatObject of other blob keys asks first whether
// anything names them, the questions asked at once gathered into one request
// (presence): a new blob costs no request of its own; a key something names
// gets the full StatObject.
func (s *Store) NewBatch() driver.Batch {
	return &batch{s: s, pending: map[string]*ack{}, absent: map[string]bool{}, presence: &presence{s: s}}
}

type batch struct {
	s       *Store
	mu      sync.Mutex
	pending map[string]*ack // key → its last metadata publish
	acks    []*ack
	absent  map[string]bool // keys the batch's StatObject found absent
	done    bool
	// presence asks about many new blob keys at once.
	presence *presence
}

// ack is a metadata publish's acknowledgement, awaited by whoever asks first
// and kept for the others (a PubAckFuture's channels deliver once).
type ack struct {
	key string
	f   jetstream.PubAckFuture
	mu  sync.Mutex
	got bool
	err error
}

func (a *ack) wait(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.got {
		select {
		case <-a.f.Ok():
		case a.err = <-a.f.Err():
		case <-ctx.Done():
			return ctx.Err()
		}
		a.got = true
	}
	return a.err
}

var errFlushed = errors.New("the batch was flushed")

func (b *batch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	b.mu.Lock()
	absent := b.absent[key]
	delete(b.absent, key)
	b.mu.Unlock()
	if _, blob := wantDigest(key); absent && blob {
		// A blob key just found absent: a new version without asking again.
		// Whoever stored the key meanwhile made it a key of two versions, and
		// readers take the first that holds the content the key names
		// (pick): any honest one is this content.
		return full(b.s.gone(ctx, b.s.upload(ctx, key, r, size, b.publishMeta)))
	}
	return full(b.s.gone(ctx, b.s.put(ctx, key, r, size, b.publishMeta)))
}

// publishMeta publishes info's metadata message, its acknowledgement left to
// Flush.
func (b *batch) publishMeta(_ context.Context, key string, info *jetstream.ObjectInfo) error {
	m, err := b.s.metaMsg(key, info)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return errFlushed
	}
	f, err := b.s.js.PublishMsgAsync(m)
	if err != nil {
		return err
	}
	a := &ack{key: key, f: f}
	b.pending[key] = a
	b.acks = append(b.acks, a)
	return nil
}

func (b *batch) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	b.mu.Lock()
	a := b.pending[key]
	b.mu.Unlock()
	if a != nil {
		if err := a.wait(ctx); err != nil {
			return driver.ObjectInfo{}, b.s.gone(ctx, err)
		}
	}
	if _, blob := wantDigest(key); blob && a == nil {
		if found, err := b.presence.present(ctx, key); err == nil && !found {
			b.mu.Lock()
			b.absent[key] = true
			b.mu.Unlock()
			return driver.ObjectInfo{}, ledger.ErrNotFound
		}
	}
	info, err := b.s.Stat(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		b.mu.Lock()
		b.absent[key] = true
		b.mu.Unlock()
	}
	return info, err
}

// Flush waits for the acknowledgement of every metadata message the batch
// published: then each of its objects is stored by the stream.
func (b *batch) Flush(ctx context.Context) error {
	b.mu.Lock()
	b.done = true
	acks := b.acks
	b.mu.Unlock()
	for _, a := range acks {
		if err := a.wait(ctx); err != nil {
			return fmt.Errorf("flush batch: put object %q: %w", a.key, full(err))
		}
	}
	return nil
}

package ledger

import (
	"context"
	"time"
)

// KVEntry is one key's current value in a KV bucket.
type KVEntry struct {
	Key      string
	Value    []byte
	Revision uint64    // the bucket's revision of this value; > 0
	Created  time.Time // when the bucket stored it, by the bucket's clock (the server's)
}

// KV is a ledger's side bucket of small revision-checked values beside its log:
// host heartbeats, swamp's locks and its control plane. Keys are
// [A-Za-z0-9_=./-]+, not starting or ending with "."; a bucket keeps only each
// key's latest value.
//
// Revisions are the compare-and-set tokens: Create, Update and a revision-checked
// Delete succeed only when the key is in the state the caller last saw, and
// otherwise fail with an error wrapping ErrConflict, changing nothing. Times are
// the bucket's own (the server's clock), so hosts whose clocks disagree compare
// one clock — what lock expiry needs.
//
// Every method takes a context first; it blocks at most until the context is
// done. Implementations never log and never panic.
type KV interface {
	// Get returns the key's value; ErrNotFound if it has none (never set, or
	// deleted).
	Get(ctx context.Context, key string) (KVEntry, error)
	// Put sets the key's value whatever it was, and returns its revision.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// Create sets the key's value only if it has none; ErrConflict otherwise.
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	// Update sets the key's value only if its current revision is last;
	// ErrConflict otherwise (a newer value, or none).
	Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error)
	// Delete removes the key's value. With last > 0 only if its current revision
	// is last (ErrConflict otherwise, including when it has no value); with last
	// 0 whatever it is, and deleting a key with no value is not an error.
	Delete(ctx context.Context, key string, last uint64) error
	// List returns the keys starting with prefix that have a value, sorted by key.
	List(ctx context.Context, prefix string) ([]KVEntry, error)
}

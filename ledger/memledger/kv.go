package memledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// KV is an in-memory ledger.KV. Its times come from its clock, so a test can
// move a lock's expiry without sleeping.
type KV struct {
	now func() time.Time

	mu   sync.Mutex
	rev  uint64 // the bucket's last revision (deletes take one too)
	vals map[string]ledger.KVEntry
	last map[string]uint64 // key → revision of its last operation, delete included
}

var _ ledger.KV = (*KV)(nil)

// NewKV returns an empty bucket whose clock is now (time.Now if nil).
func NewKV(now func() time.Time) *KV {
	if now == nil {
		now = time.Now
	}
	return &KV{now: now, vals: map[string]ledger.KVEntry{}, last: map[string]uint64{}}
}

// set stores value under key at the next revision; the caller holds mu.
func (k *KV) set(key string, value []byte) uint64 {
	k.rev++
	k.vals[key] = ledger.KVEntry{Key: key, Value: slices.Clone(value), Revision: k.rev, Created: k.now()}
	k.last[key] = k.rev
	return k.rev
}

// op runs f under the bucket's lock after checking the key and ctx.
func op[T any](k *KV, ctx context.Context, name, key string, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%s %s: %w", name, key, err)
	}
	if err := validKey(key); err != nil {
		return zero, fmt.Errorf("%s %s: %w", name, key, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	v, err := f()
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", name, key, err)
	}
	return v, nil
}

// validKey applies the key rule the ledger.KV contract states (JetStream's).
func validKey(key string) error {
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") {
		return fmt.Errorf("key %q: %w", key, ledger.ErrInvalid)
	}
	for _, c := range key {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_=./-", c)
		if !ok {
			return fmt.Errorf("key %q: %w", key, ledger.ErrInvalid)
		}
	}
	return nil
}

func (k *KV) Get(ctx context.Context, key string) (ledger.KVEntry, error) {
	return op(k, ctx, "get", key, func() (ledger.KVEntry, error) {
		e, ok := k.vals[key]
		if !ok {
			return e, ledger.ErrNotFound
		}
		e.Value = slices.Clone(e.Value)
		return e, nil
	})
}

func (k *KV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return op(k, ctx, "put", key, func() (uint64, error) { return k.set(key, value), nil })
}

func (k *KV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return op(k, ctx, "create", key, func() (uint64, error) {
		if _, ok := k.vals[key]; ok {
			return 0, ledger.ErrConflict
		}
		return k.set(key, value), nil
	})
}

func (k *KV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	return op(k, ctx, "update", key, func() (uint64, error) {
		if e, ok := k.vals[key]; !ok || e.Revision != last {
			return 0, ledger.ErrConflict
		}
		return k.set(key, value), nil
	})
}

func (k *KV) Delete(ctx context.Context, key string, last uint64) error {
	_, err := op(k, ctx, "delete", key, func() (struct{}, error) {
		if last != 0 && k.last[key] != last {
			return struct{}{}, ledger.ErrConflict
		}
		k.rev++
		delete(k.vals, key)
		k.last[key] = k.rev
		return struct{}{}, nil
	})
	return err
}

func (k *KV) List(ctx context.Context, prefix string) ([]ledger.KVEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s*: %w", prefix, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []ledger.KVEntry
	for _, key := range slices.Sorted(maps.Keys(k.vals)) {
		if strings.HasPrefix(key, prefix) {
			e := k.vals[key]
			e.Value = slices.Clone(e.Value)
			out = append(out, e)
		}
	}
	return out, nil
}

package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// memStore is a minimal correct ObjectStore: the suites' own reference, showing
// that everything they ask for is satisfiable by the plainest implementation.
type memStore struct {
	mu   sync.Mutex
	objs map[string]memObject
}

type memObject struct {
	data    []byte
	modTime time.Time
}

func (m *memStore) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ledger.ValidateKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	pr := ledger.NewPutReader(ctx, r, size)
	b, err := io.ReadAll(pr)
	if err == nil {
		err = pr.Done()
	}
	if err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = memObject{data: b, modTime: time.Now()}
	return nil
}

// NewBatch: a put is as durable as memory gets when it returns.
func (m *memStore) NewBatch() ledger.ObjectBatch { return ledger.DurableEach(m) }

func (m *memStore) get(ctx context.Context, verb, key string) (memObject, error) {
	if err := ledger.ValidateKey(key); err != nil {
		return memObject{}, fmt.Errorf("%s object: %w", verb, err)
	}
	if err := ctx.Err(); err != nil {
		return memObject{}, fmt.Errorf("%s object %q: %w", verb, key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return memObject{}, fmt.Errorf("%s object %q: %w", verb, key, ledger.ErrNotFound)
	}
	return o, nil
}

func (m *memStore) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	o, err := m.get(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

func (m *memStore) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	o, err := m.get(ctx, "stat", key)
	if err != nil {
		return ledger.ObjectInfo{}, err
	}
	return ledger.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

func (m *memStore) DeleteObject(ctx context.Context, key string) error {
	if err := ledger.ValidateKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

func (m *memStore) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	if err := ledger.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	m.mu.Lock()
	var infos []ledger.ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, ledger.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(infos, func(a, b ledger.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, info := range infos {
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

func newMemStore(*testing.T) ledger.ObjectStore { return &memStore{objs: map[string]memObject{}} }

func TestSuitesOnMemStore(t *testing.T) {
	t.Run("ObjectStore", func(t *testing.T) { TestObjectStore(t, newMemStore) })
	t.Run("BlobStore", func(t *testing.T) { TestBlobStore(t, newMemStore) })
}

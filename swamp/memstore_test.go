package swamp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// memStore is an in-memory ledger.ObjectStore with atomic puts, for tests
// where a file store's fsyncs would dominate the run time.
type memStore struct {
	mu   sync.Mutex
	objs map[string][]byte
}

var _ ledger.ObjectStore = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{objs: map[string][]byte{}} }

func (m *memStore) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if size >= 0 && int64(len(b)) != size {
		return fmt.Errorf("put %s: %d bytes, size says %d: %w", key, len(b), size, ledger.ErrInvalid)
	}
	m.mu.Lock()
	m.objs[key] = b
	m.mu.Unlock()
	return ctx.Err()
}

func (m *memStore) GetObject(_ context.Context, key string) (io.ReadCloser, error) {
	m.mu.Lock()
	b, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memStore) StatObject(_ context.Context, key string) (ledger.ObjectInfo, error) {
	m.mu.Lock()
	b, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return ledger.ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ledger.ErrNotFound)
	}
	return ledger.ObjectInfo{Key: key, Size: int64(len(b)), ModTime: time.Unix(0, 0)}, nil
}

func (m *memStore) DeleteObject(_ context.Context, key string) error {
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

func (m *memStore) ListObjects(_ context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	m.mu.Lock()
	keys := slices.Sorted(maps.Keys(m.objs))
	m.mu.Unlock()
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		info, err := m.StatObject(context.Background(), k)
		if err != nil {
			continue
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

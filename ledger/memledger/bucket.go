package memledger

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger/driver"
)

// Bucket is the in-memory driver.Bucket: the ledger's blob store, or a swamp
// datastore, for tests where a file store's fsyncs would dominate the run
// time (ledger.NewBucket(memledger.NewBucket(nil), policy)). Its times come
// from its clock. Its knobs make it a bucket that does not exist (Remove) or
// one whose every request is refused for lack of permission (Deny), as a
// backend's would be. Safe for concurrent use.
type Bucket struct {
	now    func() time.Time
	mu     sync.Mutex
	objs   map[string]memObject
	gone   bool
	denied bool
}

type memObject struct {
	data    []byte
	modTime time.Time
}

var _ driver.Bucket = (*Bucket)(nil)

// NewBucket returns an empty bucket whose clock is now (time.Now if nil).
func NewBucket(now func() time.Time) *Bucket {
	if now == nil {
		now = time.Now
	}
	return &Bucket{now: now, objs: map[string]memObject{}}
}

// Errors of a removed and of a denying bucket.
var (
	errNoBucket = errors.New("memledger: the bucket does not exist")
	errDenied   = errors.New("memledger: access denied")
	errAbsent   = errors.New("memledger: no such object")
)

// MissingBucket returns a bucket that does not exist (see Remove).
func MissingBucket() *Bucket {
	b := NewBucket(nil)
	b.Remove()
	return b
}

// DeniedBucket returns a bucket that refuses every request (see Deny).
func DeniedBucket() *Bucket {
	b := NewBucket(nil)
	b.Deny(true)
	return b
}

// Remove makes the bucket not exist: every request fails as a backend's of a
// missing bucket does (driver.NoBucket), and what it held is gone.
func (m *Bucket) Remove() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gone, m.objs = true, map[string]memObject{}
}

// Deny makes every request fail for lack of permission
// (driver.PermissionDenied), or none again.
func (m *Bucket) Deny(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.denied = on
}

// refused is the answer to every request of a removed or denying bucket; the
// caller holds mu.
func (m *Bucket) refused() error {
	switch {
	case m.denied:
		return errDenied
	case m.gone:
		return errNoBucket
	}
	return nil
}

// Put implements driver.Bucket: the object is stored once r reached io.EOF.
func (m *Bucket) Put(_ context.Context, key string, r io.Reader, _ int64) error {
	m.mu.Lock()
	err := m.refused()
	m.mu.Unlock()
	if err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refused(); err != nil {
		return err
	}
	m.objs[key] = memObject{data: b, modTime: m.now()}
	return nil
}

func (m *Bucket) object(key string) (memObject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refused(); err != nil {
		return memObject{}, err
	}
	o, ok := m.objs[key]
	if !ok {
		return memObject{}, errAbsent
	}
	return o, nil
}

// Get implements driver.Bucket.
func (m *Bucket) Get(_ context.Context, key string) (io.ReadCloser, error) {
	o, err := m.object(key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

// Stat implements driver.Bucket.
func (m *Bucket) Stat(_ context.Context, key string) (driver.ObjectInfo, error) {
	o, err := m.object(key)
	if err != nil {
		return driver.ObjectInfo{}, err
	}
	return driver.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// Delete implements driver.Bucket.
func (m *Bucket) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refused(); err != nil {
		return err
	}
	delete(m.objs, key)
	return nil
}

// List implements driver.Bucket, from a copy of the listing taken first.
func (m *Bucket) List(_ context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	m.mu.Lock()
	if err := m.refused(); err != nil {
		m.mu.Unlock()
		return err
	}
	var infos []driver.ObjectInfo
	for _, k := range slices.Sorted(maps.Keys(m.objs)) {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, driver.ObjectInfo{Key: k, Size: int64(len(m.objs[k].data)), ModTime: m.objs[k].modTime})
		}
	}
	m.mu.Unlock()
	for _, info := range infos {
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// NewBatch implements driver.Bucket: a put is as durable as memory gets when
// it returns.
func (m *Bucket) NewBatch() driver.Batch { return driver.DurableEach(m) }

// PreferPut implements driver.Bucket: asking costs nothing.
func (m *Bucket) PreferPut(int64) bool { return false }

// ErrorCode implements driver.Bucket.
func (m *Bucket) ErrorCode(err error) driver.ErrorCode {
	switch {
	case errors.Is(err, errAbsent):
		return driver.NotFound
	case errors.Is(err, errNoBucket):
		return driver.NoBucket
	case errors.Is(err, errDenied):
		return driver.PermissionDenied
	}
	return driver.Unknown
}

// Close implements driver.Bucket.
func (m *Bucket) Close() error { return nil }

package natsobj

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/backend"
	"github.com/syncledger/syncledger/ledger"
)

// DefaultReadTimeout bounds a GetObject's whole read when neither the caller's
// context nor Config.ReadTimeout sets one.
const DefaultReadTimeout = 10 * time.Minute

// Config configures a Store.
type Config struct {
	// Conn is the NATS connection (required). It stays the caller's to close.
	Conn *nats.Conn
	// Bucket is the object store bucket's name (required): letters, digits, "-"
	// and "_".
	Bucket string
	// Replicas is the number of replicas a bucket New creates gets (1 to 5; 0
	// means 1). An existing bucket is used as it is.
	Replicas int
	// ReadTimeout bounds the whole read of a GetObject whose context has no
	// deadline. 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
}

// Store is a ledger.ObjectStore on a JetStream object store bucket. It is safe for
// concurrent use.
type Store struct {
	obs         jetstream.ObjectStore
	readTimeout time.Duration
}

var _ ledger.ObjectStore = (*Store)(nil)

// New validates cfg and opens the bucket, creating it if it does not exist.
func New(ctx context.Context, cfg Config) (*Store, error) {
	switch {
	case cfg.Conn == nil:
		return nil, fmt.Errorf("new nats object store: Config.Conn is nil: %w", ledger.ErrInvalid)
	case !ledger.IsToken(cfg.Bucket, 0):
		return nil, fmt.Errorf("new nats object store: bucket name %q: want letters, digits, '-' and '_': %w", cfg.Bucket, ledger.ErrInvalid)
	case cfg.Replicas < 0 || cfg.Replicas > 5:
		return nil, fmt.Errorf("new nats object store: Config.Replicas %d: want 1 to 5: %w", cfg.Replicas, ledger.ErrInvalid)
	case cfg.ReadTimeout < 0:
		return nil, fmt.Errorf("new nats object store: negative Config.ReadTimeout: %w", ledger.ErrInvalid)
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("new nats object store: %w", err)
	}
	obs, err := js.ObjectStore(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:   cfg.Bucket,
			Replicas: max(cfg.Replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(ctx, cfg.Bucket) // created concurrently
		}
	}
	if err != nil {
		return nil, fmt.Errorf("new nats object store: open bucket %q: %w", cfg.Bucket, backend.CtxErr(ctx, err))
	}
	s := &Store{obs: obs, readTimeout: cfg.ReadTimeout}
	if s.readTimeout == 0 {
		s.readTimeout = DefaultReadTimeout
	}
	return s, nil
}

// ObjectStore returns the underlying jetstream.ObjectStore.
func (s *Store) ObjectStore() jetstream.ObjectStore { return s.obs }

func mapErr(ctx context.Context, err error) error {
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return ledger.ErrNotFound
	}
	return backend.CtxErr(ctx, err)
}

// PutObject implements ledger.ObjectStore (see the package doc).
func (s *Store) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	pr := backend.NewPutReader(ctx, r, size)
	_, err := s.obs.Put(context.WithoutCancel(ctx), jetstream.ObjectMeta{Name: key}, pr)
	if err == nil {
		err = pr.Done()
	}
	if err != nil {
		if rerr := pr.Err(); rerr != nil {
			err = rerr
		}
		return fmt.Errorf("put object %q: %w", key, backend.CtxErr(ctx, err))
	}
	return nil
}

// GetObject implements ledger.ObjectStore.
func (s *Store) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		rctx, cancel = context.WithTimeout(ctx, s.readTimeout)
	}
	res, err := s.obs.Get(rctx, key)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("get object %q: %w", key, mapErr(ctx, err))
	}
	return &objectReader{res: res, ctx: ctx, key: key, cancel: cancel}, nil
}

// objectReader maps the object store's read errors and releases the read's
// context on Close.
type objectReader struct {
	res    jetstream.ObjectResult
	ctx    context.Context
	key    string
	cancel context.CancelFunc
}

func (r *objectReader) Read(p []byte) (int, error) {
	n, err := r.res.Read(p)
	switch {
	case err == nil, err == io.EOF:
		return n, err
	case errors.Is(err, jetstream.ErrDigestMismatch):
		return n, fmt.Errorf("read object %q: %w: %w", r.key, ledger.ErrChecksum, err)
	default:
		return n, fmt.Errorf("read object %q: %w", r.key, backend.CtxErr(r.ctx, err))
	}
}

func (r *objectReader) Close() error {
	err := r.res.Close()
	r.cancel()
	return err
}

// StatObject implements ledger.ObjectStore.
func (s *Store) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := backend.ValidateKey(key); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	info, err := s.obs.GetInfo(ctx, key)
	if err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, mapErr(ctx, err))
	}
	return ledger.ObjectInfo{Key: key, Size: int64(info.Size), ModTime: info.ModTime}, nil
}

// DeleteObject implements ledger.ObjectStore.
func (s *Store) DeleteObject(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	if err := s.obs.Delete(ctx, key); err != nil {
		if err := mapErr(ctx, err); !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("delete object %q: %w", key, err)
		}
	}
	return nil
}

// ListObjects implements ledger.ObjectStore. The object store lists a bucket only
// whole and unordered, so the listing is read in full, filtered and sorted before
// fn is called. fn's error is returned as is.
func (s *Store) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	if err := backend.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	all, err := s.obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return fmt.Errorf("list objects %q: %w", prefix, backend.CtxErr(ctx, err))
	}
	var infos []ledger.ObjectInfo
	for _, o := range all {
		if o.Deleted || o.Opts != nil && o.Opts.Link != nil {
			continue
		}
		if !strings.HasPrefix(o.Name, prefix) || backend.ValidateKey(o.Name) != nil {
			continue
		}
		infos = append(infos, ledger.ObjectInfo{Key: o.Name, Size: int64(o.Size), ModTime: o.ModTime})
	}
	slices.SortFunc(infos, func(a, b ledger.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, info := range infos {
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

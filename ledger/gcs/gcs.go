package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/syncledger/syncledger/internal/backend"
	"github.com/syncledger/syncledger/ledger"
)

// defaultChunkSize is the storage Writer's default buffer and chunk size.
const defaultChunkSize = 16 << 20

// Config configures a Store.
type Config struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix is the key prefix of the store inside the bucket ("" for the whole
	// bucket). Leading and trailing slashes are ignored; it is a directory: Prefix
	// "a" holds "a/x", never "ab/x".
	Prefix string
	// Client is the storage client to use. Nil means a new client from Application
	// Default Credentials (or STORAGE_EMULATOR_HOST) that reads through the JSON
	// API, which Store.Close closes; a client given here stays the caller's to
	// close.
	Client *storage.Client
}

// Store is a ledger.ObjectStore on a GCS bucket. It is safe for concurrent use.
type Store struct {
	client    *storage.Client
	ownClient bool
	bucket    *storage.BucketHandle
	root      string // "" or the prefix with one trailing slash
	chunkSize int    // if > 0, overrides the Writer's chunk size (tests force resumable uploads)
}

var _ ledger.ObjectStore = (*Store)(nil)

// New validates cfg and returns the Store. It makes no request: a missing bucket or
// bad credentials show on first use.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("new gcs store: Config.Bucket is empty: %w", ledger.ErrInvalid)
	}
	if strings.ContainsAny(cfg.Bucket, "/\\ ") {
		return nil, fmt.Errorf("new gcs store: bucket name %q: %w", cfg.Bucket, ledger.ErrInvalid)
	}
	var root string
	if p := strings.Trim(cfg.Prefix, "/"); p != "" {
		if err := backend.ValidateKey(p); err != nil {
			return nil, fmt.Errorf("new gcs store: Config.Prefix: %w", err)
		}
		root = p + "/"
	}
	s := &Store{client: cfg.Client, root: root}
	if s.client == nil {
		// JSON reads, like every other call the client makes: the library recommends
		// them and will switch to them by default, and emulators (fake-gcs-server)
		// serve XML-API downloads of names containing "/" only with extra setup.
		c, err := storage.NewClient(ctx, storage.WithJSONReads())
		if err != nil {
			return nil, fmt.Errorf("new gcs store: %w", err)
		}
		s.client, s.ownClient = c, true
	}
	s.bucket = s.client.Bucket(cfg.Bucket)
	return s, nil
}

// Close closes the storage client if New created it.
func (s *Store) Close() error {
	if s.ownClient {
		return s.client.Close()
	}
	return nil
}

func mapErr(ctx context.Context, err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return ledger.ErrNotFound
	}
	return backend.CtxErr(ctx, err)
}

// PreferPut implements ledger.PutPreferrer: an object up to 1 MiB, sent in one
// request, is sent again rather than asked for first (one request, not two).
func (s *Store) PreferPut(size int64) bool { return size >= 0 && size <= 1<<20 }

// PutObject implements ledger.ObjectStore (see the package doc).
func (s *Store) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	if err := s.put(ctx, key, r, size); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64) error {
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w := s.bucket.Object(s.root + key).NewWriter(wctx)
	w.ContentType = "application/octet-stream"
	switch {
	case s.chunkSize > 0:
		w.ChunkSize = s.chunkSize
	case size >= 0 && size < defaultChunkSize:
		w.ChunkSize = int(size) + 1 // rounded up to 256 KiB: a small buffer for a small object
	}
	pr := backend.NewPutReader(ctx, r, size)
	_, err := io.Copy(w, pr)
	if err == nil {
		err = pr.Done()
	}
	if err != nil {
		// Abandon the upload. Cancelling the Writer's context makes it close its pipe
		// with an error, which fails the request in flight; calling Close instead
		// would race with that and could finalize the partial object.
		abort()
		if rerr := pr.Err(); rerr != nil {
			return rerr
		}
		return backend.CtxErr(ctx, err)
	}
	if err := w.Close(); err != nil {
		return backend.CtxErr(ctx, err)
	}
	return nil
}

// GetObject implements ledger.ObjectStore. The reader streams the object and
// checks its CRC32C at the end.
func (s *Store) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	rc, err := s.bucket.Object(s.root + key).NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, mapErr(ctx, err))
	}
	return rc, nil
}

// StatObject implements ledger.ObjectStore.
func (s *Store) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := backend.ValidateKey(key); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	attrs, err := s.bucket.Object(s.root + key).Attrs(ctx)
	if err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, mapErr(ctx, err))
	}
	return ledger.ObjectInfo{Key: key, Size: attrs.Size, ModTime: attrs.Updated}, nil
}

// DeleteObject implements ledger.ObjectStore.
func (s *Store) DeleteObject(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	if err := s.bucket.Object(s.root + key).Delete(ctx); err != nil {
		if err := mapErr(ctx, err); !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("delete object %q: %w", key, err)
		}
	}
	return nil
}

// ListObjects implements ledger.ObjectStore, page by page (GCS lists names in
// lexical order). fn's error is returned as is.
func (s *Store) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	if err := backend.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	q := &storage.Query{Prefix: s.root + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	it := s.bucket.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if err == iterator.Done {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list objects %q: %w", prefix, mapErr(ctx, err))
		}
		key, ok := strings.CutPrefix(attrs.Name, s.root)
		if !ok || backend.ValidateKey(key) != nil {
			continue // not an object this store could have written
		}
		if err := fn(ledger.ObjectInfo{Key: key, Size: attrs.Size, ModTime: attrs.Updated}); err != nil {
			return err
		}
	}
}

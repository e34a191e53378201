package gcsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// DefaultChunkSize is the size of one request of a resumable upload, and the
// largest object sent in one request (the storage client's default).
const DefaultChunkSize = 16 << 20

// Config configures a Store.
type Config struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix is the key prefix of the store inside the bucket ("" for the whole
	// bucket). Leading and trailing slashes are ignored; it is a directory: Prefix
	// "a" holds "a/x", never "ab/x".
	Prefix string
	// Endpoint is the base URL of the JSON API, such as
	// "https://storage.googleapis.com" or an emulator's "http://127.0.0.1:4443".
	// "" means the storage client's choice: STORAGE_EMULATOR_HOST when that is
	// set (without credentials), else Google's endpoint.
	Endpoint string
	// HTTPClient sends the requests and must authorize them. Nil means the
	// storage client's own, authorized with Application Default Credentials
	// (none for STORAGE_EMULATOR_HOST).
	HTTPClient *http.Client
	// ChunkSize is the size of each request of a resumable upload, rounded up to a
	// multiple of 256 KiB; objects up to it go in one request. 0 means
	// DefaultChunkSize.
	ChunkSize int
}

// Store is the driver.Bucket on a GCS bucket. It is safe for concurrent use.
type Store struct {
	// open makes the client on first use: finding Application Default
	// Credentials reads files and may ask the metadata server, which a command
	// that opens the store but reads nothing (a no-op sync) need not pay.
	open      func() (*storage.BucketHandle, error)
	client    atomic.Pointer[storage.Client] // set by open; nil before
	name      string                         // the bucket's name
	root      string                         // "" or the prefix with one trailing slash
	chunkSize int
	seen      atomic.Bool // the bucket was seen to exist (bucketOf)
}

var _ driver.Bucket = (*Store)(nil)

// New validates cfg and returns the Store. It makes no request and looks for
// no credentials: the client is made on the store's first use, where missing
// credentials, a missing bucket or a credential GCS refuses show.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("new gcs store: Config.Bucket is empty: %w", ledger.ErrInvalid)
	}
	if strings.ContainsAny(cfg.Bucket, "/\\ ") {
		return nil, fmt.Errorf("new gcs store: bucket name %q: %w", cfg.Bucket, ledger.ErrInvalid)
	}
	var root string
	if p := strings.Trim(cfg.Prefix, "/"); p != "" {
		if err := ledger.ValidateKey(p); err != nil {
			return nil, fmt.Errorf("new gcs store: Config.Prefix: %w", err)
		}
		root = p + "/"
	}
	if cfg.ChunkSize < 0 {
		return nil, fmt.Errorf("new gcs store: Config.ChunkSize %d is negative: %w", cfg.ChunkSize, ledger.ErrInvalid)
	}
	chunk := DefaultChunkSize
	if cfg.ChunkSize > 0 {
		chunk = cfg.ChunkSize
	}
	// JSON reads: every request goes to the JSON API (the client reads through
	// the XML API by default), the one an Endpoint or emulator names.
	opts := []option.ClientOption{storage.WithJSONReads(), storage.WithDisabledClientMetrics()}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("new gcs store: endpoint %q is not an http(s) URL: %w", cfg.Endpoint, ledger.ErrInvalid)
		}
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/storage/v1/"))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	s := &Store{name: cfg.Bucket, root: root, chunkSize: chunk}
	// The client's token source refreshes with this context long after New
	// returns.
	bg := context.WithoutCancel(ctx)
	s.open = sync.OnceValues(func() (*storage.BucketHandle, error) {
		client, err := storage.NewClient(bg, opts...)
		if err != nil {
			return nil, fmt.Errorf("gcs client: %w (Application Default Credentials: run `gcloud auth application-default login`, "+
				"or set GOOGLE_APPLICATION_CREDENTIALS to a credential file)", err)
		}
		// One retry layer: the portable type's (ledger.RetryPolicy), which
		// every backend shares, bounds each attempt and replays puts.
		// RetryNever alone would leave the chunks of a resumable upload retried
		// (the upload code retries them unless given a retry function); a
		// function that refuses every error turns off all of the client's
		// retries.
		client.SetRetry(storage.WithPolicy(storage.RetryAlways), storage.WithErrorFunc(func(error) bool { return false }))
		s.client.Store(client)
		return client.Bucket(cfg.Bucket), nil
	})
	return s, nil
}

// Close implements driver.Bucket: it releases the client's connections, if
// it was made.
func (s *Store) Close() error {
	if c := s.client.Load(); c != nil {
		return c.Close()
	}
	return nil
}

// object is the handle of the object named key, making the client first if
// need be.
func (s *Store) object(key string) (*storage.ObjectHandle, error) {
	b, err := s.open()
	if err != nil {
		return nil, err
	}
	return b.Object(s.root + key), nil
}

// PreferPut implements driver.Bucket: an object up to 1 MiB, sent in one
// request, is sent again rather than asked for first (one request, not two).
func (s *Store) PreferPut(size int64) bool { return size >= 0 && size <= 1<<20 }

// NewBatch implements driver.Bucket. GCS acknowledges a put once the object
// is stored durably, so the natural batch is the puts as they are, as many at
// once as the caller runs (a commit: its Parallel); Flush has nothing left to
// wait for. A small object skips the existence check (PreferPut): presence
// costs no request.
func (s *Store) NewBatch() driver.Batch { return driver.DurableEach(s) }

// statusError carries a GCS answer's status to ledger.DefaultRetryable.
type statusError struct{ err *googleapi.Error }

func (e statusError) Error() string       { return e.err.Error() }
func (e statusError) Unwrap() error       { return e.err }
func (e statusError) HTTPStatusCode() int { return e.err.Code }

// ErrorCode implements driver.Bucket: a missing bucket is driver.NoBucket
// (see bucketOf), a missing object driver.NotFound, a 401 or 403 (missing or
// refused credentials, a policy's refusal) driver.PermissionDenied.
func (s *Store) ErrorCode(err error) driver.ErrorCode {
	var api *googleapi.Error
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return driver.NoBucket
	case errors.Is(err, storage.ErrObjectNotExist):
		return driver.NotFound
	case errors.As(err, &api) && api.Code == http.StatusNotFound:
		return driver.NotFound
	case errors.As(err, &api) && (api.Code == http.StatusForbidden || api.Code == http.StatusUnauthorized):
		return driver.PermissionDenied
	}
	return driver.Unknown
}

// bucketOf tells, after an answer that something is not found (an object's,
// which GCS gives for a missing bucket too), whether the bucket exists: once,
// by reading the bucket's attributes, until it has been seen to (the answer
// is kept). A missing bucket makes err wrap storage.ErrBucketNotExist.
func (s *Store) bucketOf(ctx context.Context, err error) error {
	var api *googleapi.Error
	if s.seen.Load() || !errors.Is(err, storage.ErrObjectNotExist) && !(errors.As(err, &api) && api.Code == http.StatusNotFound) {
		return err
	}
	b, oerr := s.open()
	if oerr != nil {
		return err
	}
	_, aerr := b.Attrs(ctx)
	switch {
	case aerr == nil:
		s.seen.Store(true)
	case errors.Is(aerr, storage.ErrBucketNotExist):
		return fmt.Errorf("%w (%w)", aerr, err)
	}
	return err
}

// apiErr makes an answer of GCS carry its HTTP status (statusError).
func apiErr(err error) error {
	var api *googleapi.Error
	if errors.As(err, &api) {
		return statusError{api}
	}
	return err
}

// Put implements driver.Bucket (see the package doc).
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, key, r, size)
}

// put writes the content through the client's Writer, which finalizes the
// object only when Close sends the last byte. On any failure before that the
// writer's context is cancelled and Close is never called, so the upload is
// abandoned, never finalized.
func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o, err := s.object(key)
	if err != nil {
		return err
	}
	w := o.NewWriter(wctx)
	w.ChunkSize = s.chunkSize
	w.ContentType = "application/octet-stream"
	n, err := io.Copy(w, r)
	if err != nil {
		return apiErr(err)
	}
	if err := w.Close(); err != nil {
		return s.bucketOf(ctx, apiErr(err))
	}
	if got := w.Attrs().Size; got != n {
		return fmt.Errorf("gcs: stored %d bytes, sent %d", got, n)
	}
	return nil
}

// Get implements driver.Bucket. The client's reader checks the object's
// CRC32C at its end and resumes a download cut short.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	// The store writes no Content-Encoding, so GCS never transcodes a download
	// and the CRC32C it reports is the bytes'.
	o, err := s.object(key)
	if err != nil {
		return nil, err
	}
	rd, err := o.NewReader(ctx)
	if err != nil {
		return nil, s.bucketOf(ctx, apiErr(err))
	}
	return &reader{rd: rd}, nil
}

// reader gives a download's errors their HTTP status.
type reader struct{ rd *storage.Reader }

func (r *reader) Read(b []byte) (int, error) {
	n, err := r.rd.Read(b)
	if err != nil && err != io.EOF {
		err = apiErr(err)
	}
	return n, err
}

func (r *reader) Close() error { return r.rd.Close() }

// Stat implements driver.Bucket.
func (s *Store) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	o, err := s.object(key)
	if err != nil {
		return driver.ObjectInfo{}, err
	}
	a, err := o.Attrs(ctx)
	if err != nil {
		return driver.ObjectInfo{}, s.bucketOf(ctx, apiErr(err))
	}
	return driver.ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated}, nil
}

// Delete implements driver.Bucket.
func (s *Store) Delete(ctx context.Context, key string) error {
	o, err := s.object(key)
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil {
		return s.bucketOf(ctx, apiErr(err))
	}
	return nil
}

// List implements driver.Bucket, page by page (GCS lists names in lexical
// order). fn's error is returned as is.
func (s *Store) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	q := &storage.Query{Prefix: s.root + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return err
	}
	b, err := s.open()
	if err != nil {
		return err
	}
	it := b.Objects(ctx, q)
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return nil
		}
		if err != nil {
			return s.bucketOf(ctx, apiErr(err))
		}
		key, ok := strings.CutPrefix(a.Name, s.root)
		if !ok {
			continue // not below the store's root
		}
		if err := fn(driver.ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated}); err != nil {
			return err
		}
	}
}

// Protection reports whether the bucket itself keeps stored objects from being
// lost to a delete or an overwrite by anyone holding write credentials: object
// versioning, or a locked retention policy. how says which, or what is
// missing.
func (s *Store) Protection(ctx context.Context) (protected bool, how string, err error) {
	b, err := s.open()
	if err != nil {
		return false, "", fmt.Errorf("read the settings of bucket %q: %w", s.name, err)
	}
	a, err := b.Attrs(ctx)
	if err != nil {
		return false, "", fmt.Errorf("read the settings of bucket %q: %w", s.name, apiErr(err))
	}
	switch {
	case a.VersioningEnabled:
		return true, "object versioning enabled", nil
	case a.RetentionPolicy != nil && a.RetentionPolicy.IsLocked:
		return true, "a locked retention policy", nil
	}
	return false, "neither object versioning nor a locked retention policy is set on bucket " + s.name, nil
}

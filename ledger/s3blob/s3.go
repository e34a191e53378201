package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// DefaultRegion is used when neither Config.Region nor the SDK's default chain
// names one.
const DefaultRegion = "us-east-1"

// maxIdleConnsPerHost is how many idle connections to the S3 endpoint are kept
// for reuse: above any host's blob transfer parallelism.
const maxIdleConnsPerHost = 64

// memSpoolLimit is the largest put kept in memory; larger ones go to a temp file.
const memSpoolLimit = 1 << 20

// Config configures a Store.
type Config struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix is the key prefix of the store inside the bucket ("" for the whole
	// bucket). Leading and trailing slashes are ignored; it is a directory: Prefix
	// "a" holds "a/x", never "ab/x".
	Prefix string
	// Endpoint is the base URL of an S3-compatible server, such as
	// "http://127.0.0.1:7070". Empty means AWS.
	Endpoint string
	// Region is the bucket's region. Empty means the SDK's default chain
	// (AWS_REGION, the shared config file), then DefaultRegion.
	Region string
	// PathStyle addresses the bucket as endpoint/bucket/key instead of
	// bucket.endpoint/key; most S3-compatible servers need it.
	PathStyle bool
	// Credentials overrides the SDK's default credential chain when set.
	Credentials aws.CredentialsProvider
	// TempDir is where puts larger than 1 MiB are spooled before they are sent.
	// Empty means os.TempDir().
	TempDir string
	// HTTPClient overrides the SDK's HTTP client when set.
	HTTPClient *http.Client
	// MultipartAbove is the size above which a put is a multipart upload (and
	// any put of unknown size). 0 means DefaultMultipartAbove; it is at least
	// PartSize.
	MultipartAbove int64
	// PartSize is the size of each part of a multipart upload but the last (at
	// least 5 MiB, S3's minimum); a multipart put holds up to three parts in
	// memory. 0 means DefaultPartSize.
	PartSize int64
}

// Multipart defaults: a single PUT is capped at 5 GiB and needs its whole body
// spooled; above 64 MiB a put streams in parts of 16 MiB.
const (
	DefaultMultipartAbove = 64 << 20
	DefaultPartSize       = 16 << 20
	minPartSize           = 5 << 20
)

// Store is the driver.Bucket on an S3 bucket. It is safe for concurrent use.
type Store struct {
	client         *awss3.Client
	uploads        *transfermanager.Client
	aws            aws.Config // as loaded
	cfg            Config
	bucket         string
	root           string // "" or the prefix with one trailing slash
	tempDir        string
	multipartAbove int64
	partSize       int64
	seen           atomic.Bool // the bucket was seen to exist (bucketOf)
}

var _ driver.Bucket = (*Store)(nil)

// New validates cfg, loads the AWS configuration and returns the Store. It
// makes no request: a missing bucket or bad credentials show on first use.
func New(ctx context.Context, cfg Config) (*Store, error) {
	root, err := validate(cfg)
	if err != nil {
		return nil, fmt.Errorf("new s3 store: %w", err)
	}
	awsCfg, err := loadAWS(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("new s3 store: %w", err)
	}
	st := &Store{aws: awsCfg, cfg: cfg, bucket: cfg.Bucket, root: root, tempDir: cfg.TempDir,
		multipartAbove: cfg.MultipartAbove, partSize: cfg.PartSize}
	if st.partSize <= 0 {
		st.partSize = DefaultPartSize
	}
	st.partSize = max(st.partSize, minPartSize)
	if st.multipartAbove <= 0 {
		st.multipartAbove = DefaultMultipartAbove
	}
	st.multipartAbove = max(st.multipartAbove, st.partSize)
	st.connect()
	return st, nil
}

func validate(cfg Config) (root string, err error) {
	if cfg.Bucket == "" {
		return "", fmt.Errorf("Config.Bucket is empty: %w", ledger.ErrInvalid)
	}
	if strings.ContainsAny(cfg.Bucket, "/\\ ") {
		return "", fmt.Errorf("bucket name %q: %w", cfg.Bucket, ledger.ErrInvalid)
	}
	if p := strings.Trim(cfg.Prefix, "/"); p != "" {
		if err := ledger.ValidateKey(p); err != nil {
			return "", fmt.Errorf("Config.Prefix: %w", err)
		}
		root = p + "/"
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("Config.Endpoint %q: want http(s)://host[:port]: %w", cfg.Endpoint, ledger.ErrInvalid)
		}
	}
	return root, nil
}

// ErrorCode implements driver.Bucket: NoSuchBucket is driver.NoBucket;
// NoSuchKey, NotFound and other 404 answers driver.NotFound; AccessDenied and
// every 403 (a policy's refusal, credentials S3 does not accept: a wrong
// secret, an expired token) driver.PermissionDenied.
func (s *Store) ErrorCode(err error) driver.ErrorCode {
	var apiErr smithy.APIError
	var respErr *awshttp.ResponseError
	switch {
	case errors.As(err, new(errNoBucket)), errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket":
		return driver.NoBucket
	case errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NoSuchKey" || apiErr.ErrorCode() == "NotFound"):
		return driver.NotFound
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "AccessDenied":
		return driver.PermissionDenied
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusNotFound:
		return driver.NotFound
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusForbidden:
		return driver.PermissionDenied
	}
	return driver.Unknown
}

// errNoBucket is the answer of a HEAD of an object in a bucket that does not
// exist, which says only 404 (a HEAD's answer has no body to name
// NoSuchBucket): see bucketOf.
type errNoBucket struct{ err error }

func (e errNoBucket) Error() string {
	return "NoSuchBucket: the bucket does not exist (" + e.err.Error() + ")"
}
func (e errNoBucket) Unwrap() error { return e.err }

// bucketOf tells, after a HEAD of an object answered 404, whether the bucket
// exists: once, by a HEAD of the bucket, until it has been seen to (the
// answer is kept). A missing bucket makes err an errNoBucket.
func (s *Store) bucketOf(ctx context.Context, err error) error {
	var respErr *awshttp.ResponseError
	if s.seen.Load() || !errors.As(err, &respErr) || respErr.HTTPStatusCode() != http.StatusNotFound {
		return err
	}
	_, herr := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	switch {
	case herr == nil:
		s.seen.Store(true)
	case errors.As(herr, &respErr) && respErr.HTTPStatusCode() == http.StatusNotFound:
		return errNoBucket{err}
	}
	return err
}

// PreferPut implements driver.Bucket: an object the put spools in memory is
// sent again rather than asked for first (one request instead of a HEAD and a
// PUT; the HEAD costs about as much as the PUT of a few KiB).
func (s *Store) PreferPut(size int64) bool { return size >= 0 && size <= memSpoolLimit }

// NewBatch implements driver.Bucket. S3 acknowledges a put once the object
// is stored durably, so the natural batch is the puts as they are, as many at
// once as the caller runs (a commit: its Parallel); Flush has nothing left to
// wait for. A small object skips the existence check (PreferPut): presence
// costs no request.
func (s *Store) NewBatch() driver.Batch { return driver.DurableEach(s) }

// Close implements driver.Bucket: the SDK's client holds nothing to release.
func (s *Store) Close() error { return nil }

// Put implements driver.Bucket: it spools the content and sends one PUT, or
// above Config.MultipartAbove (and for an unknown size) streams it as a
// multipart upload (see the package doc).
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if size < 0 || size > s.multipartAbove {
		return s.putMultipart(ctx, s.root+key, r, size)
	}
	body, n, cleanup, err := s.spool(r, size)
	if err != nil {
		return err
	}
	defer cleanup()
	_, err = s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.root + key),
		Body: body, ContentLength: aws.Int64(n), ContentType: aws.String(contentType),
	})
	return err
}

const contentType = "application/octet-stream"

// putMultipart sends r through the SDK's transfer manager: a multipart
// upload of parts of Config.PartSize, each a seekable body the SDK signs and
// checksums, or one PUT if all of it fits in one part. The manager completes
// the upload only once r returned io.EOF, which the portable type's reader
// does only without error at the declared size; any failure, the reader's
// included, aborts the upload.
func (s *Store) putMultipart(ctx context.Context, key string, r io.Reader, size int64) error {
	in := &transfermanager.UploadObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), Body: r, ContentType: aws.String(contentType),
	}
	if size >= 0 {
		in.ContentLength = aws.Int64(size)
	}
	_, err := s.uploads.UploadObject(ctx, in)
	return err
}

// spool reads r to EOF and returns its content as a seekable body of n bytes,
// in memory if it is at most memSpoolLimit bytes, else in a temporary file that
// cleanup removes.
func (s *Store) spool(r io.Reader, size int64) (body io.ReadSeeker, n int64, cleanup func(), err error) {
	var buf bytes.Buffer
	if size >= 0 && size <= memSpoolLimit {
		buf.Grow(int(size) + 1)
	}
	if _, err := io.CopyN(&buf, r, memSpoolLimit+1); err != nil && err != io.EOF {
		return nil, 0, nil, err
	}
	if buf.Len() <= memSpoolLimit {
		return bytes.NewReader(buf.Bytes()), int64(buf.Len()), func() {}, nil // r ended: io.EOF
	}
	f, err := os.CreateTemp(s.tempDir, "syncledger-s3-put-*")
	if err != nil {
		return nil, 0, nil, fmt.Errorf("spool: %w", err)
	}
	cleanup = func() {
		f.Close()
		os.Remove(f.Name())
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		cleanup()
		return nil, 0, nil, fmt.Errorf("spool: %w", err)
	}
	rest, err := io.Copy(f, r)
	if err != nil {
		cleanup()
		return nil, 0, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, 0, nil, fmt.Errorf("spool: %w", err)
	}
	return f, int64(buf.Len()) + rest, cleanup, nil
}

// Get implements driver.Bucket. The reader streams the response body.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.root + key)})
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

// Stat implements driver.Bucket.
func (s *Store) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.root + key)})
	if err != nil {
		return driver.ObjectInfo{}, s.bucketOf(ctx, err)
	}
	return driver.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Delete implements driver.Bucket.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.root + key)})
	return err
}

// List implements driver.Bucket, page by page (S3 returns keys in UTF-8 byte
// order, which is Go's string order). fn's error is returned as is.
func (s *Store) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	pages := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.root + prefix),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, obj := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(obj.Key), s.root)
			if !ok {
				continue // not below the store's root
			}
			if err := fn(driver.ObjectInfo{Key: key, Size: aws.ToInt64(obj.Size), ModTime: aws.ToTime(obj.LastModified)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Protection reports whether the bucket itself keeps stored objects from being
// lost to a delete or an overwrite by anyone holding write credentials: object
// versioning enabled, or an object lock. how says which, or what is missing.
func (s *Store) Protection(ctx context.Context) (protected bool, how string, err error) {
	v, err := s.client.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		return false, "", fmt.Errorf("read the versioning of bucket %q: %w", s.bucket, err)
	}
	if v.Status == types.BucketVersioningStatusEnabled {
		return true, "versioning enabled", nil
	}
	lock, err := s.client.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String(s.bucket)})
	if err == nil && lock.ObjectLockConfiguration != nil && lock.ObjectLockConfiguration.ObjectLockEnabled == types.ObjectLockEnabledEnabled {
		return true, "object lock enabled", nil
	}
	return false, "neither versioning nor an object lock is enabled on bucket " + s.bucket, nil
}

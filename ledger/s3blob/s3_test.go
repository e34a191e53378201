package s3blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/s3test"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
)

const fakeBucket = "syncledger-fake"

// startFake starts an in-process S3 (gofakes3 on httptest) holding fakeBucket and
// returns a Config for it, without a prefix.
func startFake(t *testing.T) Config {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket(fakeBucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
	t.Cleanup(srv.Close)
	return Config{
		Bucket:      fakeBucket,
		Endpoint:    srv.URL,
		Region:      "us-east-1",
		PathStyle:   true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		TempDir:     t.TempDir(),
	}
}

// storeMaker returns a newStore for the conformance suites: each call a Store on a
// fresh prefix below root in base's bucket.
func storeMaker(base Config, root string) func(t *testing.T) driver.Bucket {
	var n atomic.Int64
	return func(t *testing.T) driver.Bucket {
		t.Helper()
		cfg := base
		cfg.Prefix = fmt.Sprintf("%s/t%03d", root, n.Add(1))
		s, err := New(t.Context(), cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	}
}

// bucket is the portable type over s, retrying nothing (the tests here are
// of the driver).
func bucket(s driver.Bucket) *ledger.Bucket {
	return ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
}

func TestFakeS3(t *testing.T) {
	t.Parallel()
	cfg := startFake(t)
	missing := cfg
	missing.Bucket = "no-such-bucket"
	drivertest.TestBucket(t, drivertest.Harness{
		New:      storeMaker(cfg, "objects"),
		NoBucket: storeMaker(missing, "gone"),
		Denied:   storeMaker(denying(t), "denied"),
	})
}

// denying returns a Config for an S3 server that refuses every request as a
// bucket policy denying the caller does: 403 AccessDenied.
func denying(t *testing.T) Config {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
		}
	}))
	t.Cleanup(srv.Close)
	return Config{Bucket: fakeBucket, Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), TempDir: t.TempDir()}
}

// TestRealS3 runs the suites against the S3 server at SYNCLEDGER_TEST_S3_ENDPOINT
// (scripts/versitygw.sh starts one). It fails, never skips, if that server is set
// but unreachable.
func TestRealS3(t *testing.T) {
	srv, ok := s3test.FromEnv()
	if !ok {
		t.Skip(s3test.Hint + "; or set it, " + s3test.BucketEnv + " (default " + s3test.DefaultBucket +
			"), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to run against a real S3 server")
	}
	cfg := Config{Bucket: srv.Bucket, Endpoint: srv.Endpoint, PathStyle: true, TempDir: t.TempDir()}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		cfg.Region = DefaultRegion
	}
	if _, err := New(t.Context(), cfg); err != nil {
		t.Fatalf("SYNCLEDGER_TEST_S3_* configuration: %v", err)
	}
	root := srv.Prefix(t, "syncledger-test") // fails the test if the server is not usable
	missing := cfg
	missing.Bucket = fmt.Sprintf("syncledger-missing-%d", time.Now().UnixNano())
	wrong := cfg
	wrong.Credentials = credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), "not-the-secret", "")
	drivertest.TestBucket(t, drivertest.Harness{
		New:      storeMaker(cfg, root+"/objects"),
		NoBucket: storeMaker(missing, "gone"),
		// Credentials the server does not accept: 403, as a denying
		// policy's AccessDenied.
		Denied: storeMaker(wrong, root+"/denied"),
	})
	t.Run("Multipart", func(t *testing.T) { testMultipart(t, cfg, root+"/mp") })
}

func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	base := startFake(t)
	drivertest.TestPrefixIsolation(t, func(t *testing.T, prefix string) driver.Bucket {
		cfg := base
		cfg.Prefix = prefix
		s, err := New(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{},
		{Bucket: "a/b"},
		{Bucket: "b", Prefix: "a//b"},
		{Bucket: "b", Prefix: "../x"},
		{Bucket: "b", Endpoint: "localhost:9000"},
		{Bucket: "b", Endpoint: "ftp://host"},
	} {
		if _, err := New(t.Context(), cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

func TestMissingBucketIsNotNotFound(t *testing.T) {
	t.Parallel()
	cfg := startFake(t)
	cfg.Bucket = "no-such-bucket"
	st, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket(st).GetObject(t.Context(), "k"); err == nil || errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetObject in a missing bucket = %v, want an error that is not ErrNotFound", err)
	}
}

// TestMultipart: a put above Config.MultipartAbove (or of unknown size) is a
// multipart upload that reads back whole; one whose reader fails, or ends short
// of its declared size, leaves no object and the key's previous version in
// place. The conformance suites pass with every put of unknown size multipart.
func TestMultipart(t *testing.T) {
	t.Parallel()
	testMultipart(t, startFake(t), "mp")
}

// testMultipart runs TestMultipart's checks in cfg's bucket below root.
func testMultipart(t *testing.T, cfg Config, root string) {
	cfg.MultipartAbove, cfg.PartSize = minPartSize, minPartSize
	t.Run("ObjectStore", func(t *testing.T) { drivertest.TestObjectStore(t, storeMaker(cfg, root+"-objects")) })
	t.Run("BlobStore", func(t *testing.T) { drivertest.TestBlobStore(t, storeMaker(cfg, root+"-blobs")) })

	ctx := t.Context()
	s := bucket(storeMaker(cfg, root)(t))
	big := make([]byte, 2*minPartSize+12345)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	for _, size := range []int64{int64(len(big)), -1} {
		if err := s.PutObject(ctx, "k", bytes.NewReader(big), size); err != nil {
			t.Fatalf("put of %d bytes (size %d): %v", len(big), size, err)
		}
		rc, err := s.GetObject(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("read back %d bytes (%v), want the %d put", len(got), err, len(big))
		}
	}
	failing := io.MultiReader(bytes.NewReader(big[:minPartSize+100]), iotest.ErrReader(errors.New("disk gone")))
	if err := s.PutObject(ctx, "k", failing, int64(len(big))); err == nil {
		t.Fatal("a put whose reader failed after a part succeeded")
	}
	if err := s.PutObject(ctx, "k", bytes.NewReader(big[:minPartSize+100]), int64(len(big))); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a put that ended short of its size = %v, want ErrInvalid", err)
	}
	if err := s.PutObject(ctx, "new", bytes.NewReader(big[:minPartSize+100]), int64(len(big))); err == nil {
		t.Fatal("short put of a new key succeeded")
	}
	if _, err := s.StatObject(ctx, "new"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("after a failed multipart put of a new key: stat = %v, want ErrNotFound", err)
	}
	if info, err := s.StatObject(ctx, "k"); err != nil || info.Size != int64(len(big)) {
		t.Fatalf("after failed puts the previous version: %+v %v", info, err)
	}
}

package gcsblob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/syncledger/syncledger/internal/gcstest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
)

const fakeBucket = "syncledger-fake"

// startFake starts a fake-gcs-server process holding fakeBucket.
func startFake(t *testing.T) *gcstest.Server {
	t.Helper()
	srv := gcstest.Start(t)
	srv.CreateBucket(t, fakeBucket)
	return srv
}

// fakeConfig is a Config for srv over HTTP on loopback.
func fakeConfig(srv *gcstest.Server, prefix string) Config {
	return Config{Bucket: fakeBucket, Prefix: prefix, Endpoint: srv.URL(), HTTPClient: &http.Client{}}
}

func storeMaker(srv *gcstest.Server, root string) func(t *testing.T) driver.Bucket {
	var n atomic.Int64
	return func(t *testing.T) driver.Bucket {
		t.Helper()
		s, err := New(t.Context(), fakeConfig(srv, fmt.Sprintf("%s/t%03d", root, n.Add(1))))
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

func TestFakeGCS(t *testing.T) {
	t.Parallel()
	srv := startFake(t)
	drivertest.TestBucket(t, drivertest.Harness{
		New: storeMaker(srv, "objects"),
		NoBucket: func(t *testing.T) driver.Bucket {
			cfg := fakeConfig(srv, "gone")
			cfg.Bucket = "no-such-bucket"
			return newStore(t, cfg)
		},
		// A server that refuses every request, as GCS refuses credentials
		// an IAM policy does not allow: 403.
		Denied: func(t *testing.T) driver.Bucket {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error":{"code":403,"message":"denied by policy","errors":[{"reason":"forbidden"}]}}`)
			}))
			t.Cleanup(api.Close)
			return newStore(t, Config{Bucket: fakeBucket, Endpoint: api.URL, HTTPClient: &http.Client{}})
		},
	})
}

// newStore returns the Store cfg configures, closed when the test ends.
func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	srv := startFake(t)
	drivertest.TestPrefixIsolation(t, func(t *testing.T, prefix string) driver.Bucket {
		s, err := New(t.Context(), fakeConfig(srv, prefix))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	// New makes no request: a client is given only so that none is looked for.
	hc := &http.Client{}
	for _, cfg := range []Config{
		{HTTPClient: hc},
		{Bucket: "a/b", HTTPClient: hc},
		{Bucket: "b", Prefix: "a//b", HTTPClient: hc},
		{Bucket: "b", Prefix: "../x", HTTPClient: hc},
		{Bucket: "b", Endpoint: "storage.example", HTTPClient: hc},
		{Bucket: "b", ChunkSize: -1, HTTPClient: hc},
	} {
		if _, err := New(t.Context(), cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

// TestEmulatorHost runs the suites through a client New builds itself, pointed at a
// fake-gcs-server by STORAGE_EMULATOR_HOST, with a small chunk size so that large
// puts are resumable uploads of many chunks (a failed one must not be finalized).
func TestEmulatorHost(t *testing.T) {
	srv := startFake(t)
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
	var n atomic.Int64
	newStore := func(t *testing.T) driver.Bucket {
		t.Helper()
		s, err := New(t.Context(), Config{Bucket: fakeBucket, Prefix: fmt.Sprintf("t%03d", n.Add(1)), ChunkSize: 256 << 10})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("ObjectStore", func(t *testing.T) { drivertest.TestObjectStore(t, newStore) })
	t.Run("BlobStore", func(t *testing.T) { drivertest.TestBlobStore(t, newStore) })
}

// cutBody is a transport that serves every download short by one byte and
// without a Content-Length, so that the length cannot tell: only the CRC32C
// GCS reports can.
type cutBody struct{}

func (cutBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.URL.Query().Get("alt") != "media" || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b[:len(b)-1]))
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// TestCutDownloadRefused checks that a download that ends early, saying so,
// is a read error: never silently fewer bytes.
func TestCutDownloadRefused(t *testing.T) {
	t.Parallel()
	srv := startFake(t)
	s, err := New(t.Context(), fakeConfig(srv, "cut"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := bucket(s).PutObject(ctx, "k", strings.NewReader("content"), 7); err != nil {
		t.Fatal(err)
	}
	cfg := fakeConfig(srv, "cut")
	cfg.HTTPClient = &http.Client{Transport: cutBody{}}
	cut, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := bucket(cut).GetObject(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err == nil {
		t.Fatalf("read %q without an error, want a checksum error", b)
	}
}

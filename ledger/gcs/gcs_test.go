package gcs

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/syncledger/syncledger/internal/gcstest"
	"github.com/syncledger/syncledger/internal/ledgertest"
	"github.com/syncledger/syncledger/ledger"
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

func storeMaker(srv *gcstest.Server, root string) func(t *testing.T) ledger.ObjectStore {
	var n atomic.Int64
	return func(t *testing.T) ledger.ObjectStore {
		t.Helper()
		s, err := New(t.Context(), fakeConfig(srv, fmt.Sprintf("%s/t%03d", root, n.Add(1))))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	}
}

func TestFakeGCS(t *testing.T) {
	t.Parallel()
	srv := startFake(t)
	t.Run("ObjectStore", func(t *testing.T) { ledgertest.TestObjectStore(t, storeMaker(srv, "objects")) })
	t.Run("BlobStore", func(t *testing.T) { ledgertest.TestBlobStore(t, storeMaker(srv, "blobs")) })
}

func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	srv := startFake(t)
	ledgertest.TestPrefixIsolation(t, func(t *testing.T, prefix string) ledger.ObjectStore {
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
	newStore := func(t *testing.T) ledger.ObjectStore {
		t.Helper()
		s, err := New(t.Context(), Config{Bucket: fakeBucket, Prefix: fmt.Sprintf("t%03d", n.Add(1)), ChunkSize: 256 << 10})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("ObjectStore", func(t *testing.T) { ledgertest.TestObjectStore(t, newStore) })
	t.Run("BlobStore", func(t *testing.T) { ledgertest.TestBlobStore(t, newStore) })
}

// TestApplicationDefaultCredentials checks that a store New builds without an
// HTTPClient authorizes its requests with Application Default Credentials: an
// authorized_user key file (GOOGLE_APPLICATION_CREDENTIALS) whose token endpoint
// is a local server.
func TestApplicationDefaultCredentials(t *testing.T) {
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("refresh_token") != "refresh-1" {
			http.Error(w, "bad refresh request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"token-1","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokens.Close)
	key := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(key, []byte(`{"type":"authorized_user","client_id":"c","client_secret":"s",`+
		`"refresh_token":"refresh-1","token_uri":"`+tokens.URL+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)
	t.Setenv("STORAGE_EMULATOR_HOST", "")

	fake, err := url.Parse(startFake(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(fake)
	var unauthorized atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token-1" {
			unauthorized.Add(1)
			http.Error(w, `{"error":{"message":"no credentials"}}`, http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	s, err := New(t.Context(), Config{Bucket: fakeBucket, Endpoint: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.PutObject(ctx, "k", strings.NewReader("v"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StatObject(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Fatalf("%d requests without the ADC token", n)
	}

	// Without the token the same server refuses, so the check above means something.
	plain, err := New(ctx, Config{Bucket: fakeBucket, Endpoint: api.URL, HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.StatObject(ctx, "k"); err == nil || unauthorized.Load() != 1 {
		t.Fatalf("stat without credentials = %v (%d refused), want HTTP 401", err, unauthorized.Load())
	}
}

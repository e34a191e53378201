package gcs

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/syncledger/syncledger/internal/ledgertest"
	"github.com/syncledger/syncledger/ledger"
)

const fakeBucket = "syncledger-fake"

// startFake starts an in-process fake-gcs-server holding fakeBucket.
func startFake(t *testing.T) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: fakeBucket})
	return srv
}

func storeMaker(srv *fakestorage.Server, root string) func(t *testing.T) ledger.ObjectStore {
	client := srv.Client()
	var n atomic.Int64
	return func(t *testing.T) ledger.ObjectStore {
		t.Helper()
		s, err := New(t.Context(), Config{
			Bucket: fakeBucket,
			Prefix: fmt.Sprintf("%s/t%03d", root, n.Add(1)),
			Client: client,
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	}
}

func TestFakeGCS(t *testing.T) {
	srv := startFake(t)
	t.Run("ObjectStore", func(t *testing.T) { ledgertest.TestObjectStore(t, storeMaker(srv, "objects")) })
	t.Run("BlobStore", func(t *testing.T) { ledgertest.TestBlobStore(t, storeMaker(srv, "blobs")) })
}

func TestPrefixIsolation(t *testing.T) {
	ctx := t.Context()
	client := startFake(t).Client()
	stores := map[string]*Store{}
	for _, p := range []string{"", "a", "/ab/", "a/b"} {
		s, err := New(ctx, Config{Bucket: fakeBucket, Prefix: p, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		stores[p] = s
		if err := s.PutObject(ctx, "k", strings.NewReader(p), int64(len(p))); err != nil {
			t.Fatal(err)
		}
	}
	for p, want := range map[string][]string{
		"":     {"a/b/k", "a/k", "ab/k", "k"},
		"a":    {"b/k", "k"},
		"/ab/": {"k"},
		"a/b":  {"k"},
	} {
		var got []string
		if err := stores[p].ListObjects(ctx, "", func(info ledger.ObjectInfo) error {
			got = append(got, info.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("prefix %q: ListObjects = %q, want %q", p, got, want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	client := startFake(t).Client()
	for _, cfg := range []Config{
		{Client: client},
		{Bucket: "a/b", Client: client},
		{Bucket: "b", Prefix: "a//b", Client: client},
		{Bucket: "b", Prefix: "../x", Client: client},
	} {
		if _, err := New(t.Context(), cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

// TestEmulatorHost runs the suites through a client New builds itself, pointed at a
// fake-gcs-server over real HTTP by STORAGE_EMULATOR_HOST, with a small chunk size
// so that large puts are resumable uploads of many chunks (a failed one must not be
// finalized).
func TestEmulatorHost(t *testing.T) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1"})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: fakeBucket})
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
	var n atomic.Int64
	newStore := func(t *testing.T) ledger.ObjectStore {
		t.Helper()
		s, err := New(t.Context(), Config{Bucket: fakeBucket, Prefix: fmt.Sprintf("t%03d", n.Add(1))})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		s.chunkSize = 256 << 10
		return s
	}
	t.Run("ObjectStore", func(t *testing.T) { ledgertest.TestObjectStore(t, newStore) })
	t.Run("BlobStore", func(t *testing.T) { ledgertest.TestBlobStore(t, newStore) })
}

package natsobj

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/ledgertest"
	"github.com/syncledger/syncledger/ledger"
)

// startServer runs an embedded nats-server with JetStream on a random loopback port
// for the test and returns a connection to it.
func startServer(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("new nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatalf("nats-server not ready for connections within 10s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect to nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// storeMaker returns a newStore for the conformance suites: each call a Store on a
// new bucket of the server behind nc.
func storeMaker(nc *nats.Conn, prefix string) func(t *testing.T) ledger.ObjectStore {
	var n atomic.Int64
	return func(t *testing.T) ledger.ObjectStore {
		t.Helper()
		s, err := New(t.Context(), Config{Conn: nc, Bucket: fmt.Sprintf("%s%03d", prefix, n.Add(1))})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	}
}

func TestEmbeddedNATS(t *testing.T) {
	nc := startServer(t)
	t.Run("ObjectStore", func(t *testing.T) { ledgertest.TestObjectStore(t, storeMaker(nc, "objects")) })
	t.Run("BlobStore", func(t *testing.T) { ledgertest.TestBlobStore(t, storeMaker(nc, "blobs")) })
}

func TestNewValidates(t *testing.T) {
	nc := startServer(t)
	for _, cfg := range []Config{
		{Bucket: "b"},
		{Conn: nc},
		{Conn: nc, Bucket: "a/b"},
		{Conn: nc, Bucket: "a.b"},
		{Conn: nc, Bucket: "b", Replicas: 6},
		{Conn: nc, Bucket: "b", Replicas: -1},
		{Conn: nc, Bucket: "b", ReadTimeout: -time.Second},
	} {
		if _, err := New(t.Context(), cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

// TestReopen: New on an existing bucket opens it with its objects.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	nc := startServer(t)
	s1, err := New(ctx, Config{Conn: nc, Bucket: "reopen"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.PutObject(ctx, "a/b", strings.NewReader("ab"), 2); err != nil {
		t.Fatal(err)
	}
	s2, err := New(ctx, Config{Conn: nc, Bucket: "reopen"})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s2.StatObject(ctx, "a/b"); err != nil || info.Size != 2 {
		t.Errorf("StatObject through a reopened bucket = %+v, %v", info, err)
	}
}

package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/file"
	"github.com/syncledger/syncledger/ledger/jetstream"
	"github.com/syncledger/syncledger/ledger/jetstream/jstest"
	"github.com/syncledger/syncledger/projector/host"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a ledger on a nats-server with a file blob store.
type env struct {
	nc    *nats.Conn
	log   *jetstream.Log
	blobs ledger.BlobStore
}

var ledgerN atomic.Int64

func newEnv(t testing.TB) *env {
	t.Helper()
	_, nc := jstest.RunServer(t)
	dir := t.TempDir()
	name := fmt.Sprintf("agent%d", ledgerN.Add(1))
	l, err := jetstream.Create(testCtx(t), nc, jetstream.Config{Name: name, Blobs: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := file.New(file.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return &env{nc: nc, log: l, blobs: ledger.NewBlobStore(s)}
}

// ports are the agent's ports on e, with the cache cache.
type ports struct {
	e     *env
	cache string
}

func (p ports) Host(context.Context) (*host.Host, error) {
	return host.Open(host.Config{Cache: p.cache, Host: "h", Log: p.e.log, Blobs: p.e.blobs})
}

func (p ports) Blobs(context.Context) (ledger.BlobStore, error) { return p.e.blobs, nil }

func (p ports) SwampKV(ctx context.Context) (natsjs.KeyValue, error) {
	js, err := natsjs.New(p.e.nc)
	if err != nil {
		return nil, err
	}
	return js.CreateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: "agent"})
}

func (p ports) Foreign(context.Context, string) (*host.Host, error) {
	return nil, ledger.ErrNotFound
}

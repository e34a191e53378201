package natsjs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestUnreachable: with the server killed, the log's reads and appends and
// the KV's operations fail with ledger.ErrUnreachable (an append also with
// ErrOutcomeUnknown); with it up, an answer saying no is never unreachable.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	l, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: "test", Blobs: "file:///tmp/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv := newKV(nc, newBucket(t, js, "test", "unreachable"), 0)
	if _, err := kv.Get(testCtx(t), "absent"); !errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("Get of an absent key with the server up: %v, want not found and not unreachable", err)
	}
	if _, err := kv.Create(testCtx(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(testCtx(t), "k", []byte("v")); !errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("second Create with the server up: %v, want a conflict and not unreachable", err)
	}
	events := mkCommit(t, l, next(t, l, "p"))

	srv.Kill()
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	for name, err := range map[string]error{
		"kv get":    func() error { _, err := kv.Get(short(), "k"); return err }(),
		"kv create": func() error { _, err := kv.Create(short(), "k2", []byte("v")); return err }(),
		"last seq":  func() error { _, err := l.PartitionLastSeq(short(), "p"); return err }(),
		"bounds":    func() error { _, err := l.Bounds(short()); return err }(),
	} {
		if !errors.Is(err, ledger.ErrUnreachable) {
			t.Errorf("%s with the server killed: %v, want ledger.ErrUnreachable", name, err)
		}
	}
	if _, err := l.Append(short(), events); !errors.Is(err, ledger.ErrUnreachable) || !errors.Is(err, ledger.ErrOutcomeUnknown) {
		t.Errorf("Append with the server killed: %v, want ErrUnreachable and ErrOutcomeUnknown", err)
	}
}

package natsjs

import (
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestClientEndpoints: without a Read endpoint a Client is one connection
// (as before there were two settings); with one, the log's direct gets go to
// it and everything else to Write.
func TestClientEndpoints(t *testing.T) {
	t.Parallel()
	srv, _ := natsjstest.RunServer(t)
	ctx := testCtx(t)
	one, err := Open(ctx, Config{Write: Endpoint{URL: srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if one.r != one.w {
		t.Fatal("a Client without a Read endpoint has two connections")
	}
	l, err := one.Ledger("ends").Create(ctx, LedgerConfig{Blobs: "file:///tmp/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	commitNext(t, l, "a", "b")

	two, err := Open(ctx, Config{Write: Endpoint{URL: srv.ClientURL()}, Read: Endpoint{URL: srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	if two.r == two.w {
		t.Fatal("a Client with a Read endpoint has one connection")
	}
	rl, err := two.Ledger("ends").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w0, r0 := two.w.Stats().OutMsgs, two.r.Stats().OutMsgs
	var n int
	if err := rl.Read(ctx, 1, 0, func(ledger.Record) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("Read through the read endpoint: %d records, %v", n, err)
	}
	if _, err := rl.PartitionHead(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if r := two.r.Stats().OutMsgs - r0; r < 2 {
		t.Errorf("the read connection sent %d messages for a Read and a PartitionHead, want the direct gets", r)
	}
	if w := two.w.Stats().OutMsgs - w0; w < 1 {
		t.Errorf("the write connection sent %d messages, want the stream info of the read's bounds", w)
	}
	commitNext(t, rl, "a") // writes go to Write
}

package natsblob

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
)

// TestBatchPresence: a batch's StatObject of many new blob keys at once asks
// the server far fewer times than once a key, and still finds every stored
// one (with its size) and no absent one.
func TestBatchPresence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nc0 := startServer(t)
	nc, err := nats.Connect(nc0.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := New(ctx, Config{Conn: nc, Bucket: "presence"})
	if err != nil {
		t.Fatal(err)
	}
	const stored, fresh = 10, 64
	body := func(i int) string { return fmt.Sprintf("blob %d %s", i, strings.Repeat("x", i)) }
	key := func(i int) string { return ledger.BlobKey(ledger.DigestOf([]byte(body(i)))) }
	for i := range stored {
		if err := bucket(s).PutObject(ctx, key(i), strings.NewReader(body(i)), int64(len(body(i)))); err != nil {
			t.Fatal(err)
		}
	}
	b := bucket(s).NewBatch()
	before := nc.Stats().OutMsgs
	var g errgroup.Group
	for i := stored; i < stored+fresh; i++ {
		g.Go(func() error {
			if _, err := b.StatObject(ctx, key(i)); !errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("stat of new blob %d: %v, want ErrNotFound", i, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if asked := nc.Stats().OutMsgs - before; asked > fresh/2 {
		t.Errorf("%d new blob keys stat'ed at once: %d requests, want at most %d", fresh, asked, fresh/2)
	}
	for i := range stored {
		g.Go(func() error {
			info, err := b.StatObject(ctx, key(i))
			if err != nil || info.Size != int64(len(body(i))) {
				return fmt.Errorf("stat of stored blob %d: %+v, %v", i, info, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

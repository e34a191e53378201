package natsjs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
)

// TestKVConformance runs the ledger.KV suite on the adapter, one bucket per
// subtest on one server (memledger runs the same suite).
func TestKVConformance(t *testing.T) {
	t.Parallel()
	_, nc := newLedger(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	drivertest.TestKV(t, func(t *testing.T) ledger.KV {
		n++
		return newKV(nc, newBucket(t, js, "test", "conformance_"+string(rune('a'+n))), 0)
	})
}

// TestBucketKVConformance runs the ledger.KV suite on BucketKV (the
// heartbeats' bucket of a ledger per subtest), whose Put is a bare publish
// until the bucket is open.
func TestBucketKVConformance(t *testing.T) {
	t.Parallel()
	_, nc := newLedger(t)
	n := 0
	drivertest.TestKV(t, func(t *testing.T) ledger.KV {
		n++
		name := "bucket" + string(rune('a'+n))
		if _, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: name, Blobs: "file:///tmp/blobs"}); err != nil {
			t.Fatal(err)
		}
		kv, err := HeartbeatKV(nc, name)
		if err != nil {
			t.Fatal(err)
		}
		return kv
	})
}

// TestBucketKVPut checks both ways a Put records a value: on a bucket the
// admin made with the ledger, one publish to the key's subject (the bucket
// not opened); where no bucket answers, the open that says why — a bucket
// the admin has not made yet names the upgrade. A missing ledger is
// ErrNotFound.
func TestBucketKVPut(t *testing.T) {
	t.Parallel()
	_, nc := newLedger(t)
	ctx := testCtx(t)
	for i, v := range []string{"one", "two"} {
		kv, err := HeartbeatKV(nc, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "host", []byte(v)); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
		if kv.opened() != nil {
			t.Errorf("Put %d: bucket opened, want the fast path", i)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, KVStream(HeartbeatBucket("old"))); err != nil {
		t.Fatal(err)
	}
	old, _ := HeartbeatKV(nc, "old")
	_, err = old.Put(ctx, "host", []byte("x"))
	configError(t, "Put to a bucket not made", err, "the stream")
	kv, _ := HeartbeatKV(nc, "test")
	if e, err := kv.Get(ctx, "host"); err != nil || string(e.Value) != "two" {
		t.Errorf("Get = %+v, %v; want two", e, err)
	}
	missing, _ := HeartbeatKV(nc, "nosuch")
	if _, err := missing.Put(ctx, "host", []byte("x")); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Put to a missing ledger's bucket = %v, want ErrNotFound", err)
	}
	if _, err := missing.List(ctx, ""); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("List of a missing ledger's bucket = %v, want ErrNotFound", err)
	}
}

// TestKVListHoldsNoState: listing a bucket — many listings at once, of more
// keys than one multi_last answer holds — creates no consumer on the
// bucket's stream, and gives every key's last value, deleted keys left out.
func TestKVListHoldsNoState(t *testing.T) {
	t.Parallel()
	_, nc := newLedger(t)
	ctx := testCtx(t)
	kv, err := HeartbeatKV(nc, "test")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1100
	for i := range n {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%04d", i), []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, "k0007", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "k0008", 0); err != nil {
		t.Fatal(err)
	}
	creates := spyConsumerCreates(t, nc.ConnectedUrl())
	var g errgroup.Group
	for range 20 {
		g.Go(func() error {
			es, err := kv.List(ctx, "k000")
			if err != nil {
				return err
			}
			if len(es) != 9 || es[7].Key != "k0007" || string(es[7].Value) != "v2" || es[8].Key != "k0009" {
				return fmt.Errorf("List(k000) = %+v", es)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if es, err := kv.List(ctx, ""); err != nil || len(es) != n-1 {
		t.Fatalf("List = %d entries, %v; want %d", len(es), err, n-1)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, KVStream(HeartbeatBucket("test")))
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().State.Consumers; c != 0 {
		t.Fatalf("the bucket's stream has %d consumers after 21 listings, want 0", c)
	}
	if n := creates(); n != 0 {
		t.Fatalf("21 listings sent %d consumer create requests, want 0", n)
	}
}

// TestKVGetForgedHeaders: a value written with headers of the server's names
// (a key's revision is its seq) — Nats-Sequence, Nats-Subject, Nats-Time-Stamp
// — reads back at the revision the server stored it at, under its own key:
// a writer cannot make another's update or delete expect a revision of its
// choosing (nats.go's Get takes the first Nats-Sequence header it sees).
func TestKVGetForgedHeaders(t *testing.T) {
	t.Parallel()
	_, nc := newLedger(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv := newKV(nc, newBucket(t, js, "test", "forged"), 0)
	for i := range 3 {
		if _, err := kv.Put(ctx, "other", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	m := nats.NewMsg("$KV.forged.lock")
	m.Header.Set("Nats-Sequence", "1")
	m.Header.Set("Nats-Subject", "$KV.forged.other")
	m.Header.Set("Nats-Time-Stamp", "2001-01-01T00:00:00Z")
	m.Data = []byte("holder")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "lock")
	if err != nil {
		t.Fatal(err)
	}
	if e.Key != "lock" || e.Revision != ack.Sequence || string(e.Value) != "holder" || e.Created.Year() == 2001 {
		t.Fatalf("Get = %+v, want key lock at revision %d", e, ack.Sequence)
	}
	if _, err := kv.Update(ctx, "lock", []byte("next"), e.Revision); err != nil {
		t.Fatalf("an update at the revision Get gave: %v", err)
	}
	if _, err := kv.Get(ctx, "missing"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
}

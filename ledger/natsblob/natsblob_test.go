package natsblob

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// startServer runs a nats-server with JetStream on a random loopback port for
// the test and returns a connection to it.
func startServer(t *testing.T) *nats.Conn {
	t.Helper()
	_, nc := natsjstest.RunServer(t)
	return nc
}

// storeMaker returns a newStore for the conformance suites: each call a Store on a
// new bucket of the server behind nc.
// bucket is the portable type over s, retrying nothing (the tests here are
// of the driver).
func bucket(s driver.Bucket) *ledger.Bucket {
	return ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
}

func storeMaker(nc *nats.Conn, prefix string) func(t *testing.T) driver.Bucket {
	var n atomic.Int64
	return func(t *testing.T) driver.Bucket {
		t.Helper()
		s, err := New(t.Context(), Config{Conn: nc, Bucket: fmt.Sprintf("%s%03d", prefix, n.Add(1))})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	}
}

func TestEmbeddedNATS(t *testing.T) {
	t.Parallel()
	nc := startServer(t)
	gone := storeMaker(nc, "gone")
	drivertest.TestBucket(t, drivertest.Harness{
		New: storeMaker(nc, "objects"),
		// The bucket's stream deleted under the store.
		NoBucket: func(t *testing.T) driver.Bucket {
			s := gone(t).(*Store)
			if err := s.js.DeleteStream(t.Context(), StreamName(s.bucket)); err != nil {
				t.Fatal(err)
			}
			return s
		},
		Denied: func(t *testing.T) driver.Bucket {
			t.Skip("a NATS permission violation reaches the client as an asynchronous error, " +
				"not as the request's: the connection's refusals are mapped to ErrPermission by the " +
				"NATS adapter's Open (issue 41, branch adapter), which this store's connection will come from")
			return nil
		},
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	ctx := t.Context()
	nc := startServer(t)
	s1, err := New(ctx, Config{Conn: nc, Bucket: "reopen"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket(s1).PutObject(ctx, "a/b", strings.NewReader("ab"), 2); err != nil {
		t.Fatal(err)
	}
	s2, err := New(ctx, Config{Conn: nc, Bucket: "reopen"})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := bucket(s2).StatObject(ctx, "a/b"); err != nil || info.Size != 2 {
		t.Errorf("StatObject through a reopened bucket = %+v, %v", info, err)
	}
}

// TestWriteOnce: a user who may publish on the bucket's subjects cannot alter or
// erase a stored object: roll-ups and message deletes are refused by the server,
// and later metadata (a deletion marker, another version) or extra chunks do not
// change what the object reads as.
func TestWriteOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nc := startServer(t)
	s, err := New(ctx, Config{Conn: nc, Bucket: "once"})
	if err != nil {
		t.Fatal(err)
	}
	const key = "blobs/sha256/ab/abcd"
	content := strings.Repeat("x", 300<<10) // three chunks
	if err := bucket(s).PutObject(ctx, key, strings.NewReader(content), int64(len(content))); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.first(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	metaSubj, chunkSubj := s.metaSubject(key), s.chunkSubject(first.NUID)
	publish := func(subj string, hdr nats.Header, data []byte) error {
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: hdr, Data: data})
		return err
	}
	rollup := nats.Header{jetstream.MsgRollup: []string{jetstream.MsgRollupSubject}}
	for _, subj := range []string{metaSubj, chunkSubj, "$O.once.C.x"} {
		if err := publish(subj, rollup, []byte("{}")); err == nil {
			t.Errorf("a roll-up on %s was accepted", subj)
		}
	}
	if err := s.stream.DeleteMsg(ctx, first.seq); err == nil {
		t.Errorf("deleting the metadata message was accepted")
	}
	// Another version, a deletion marker and a wildcard id in later metadata;
	// extra chunks after the object's own.
	bogus := first.ObjectInfo
	bogus.NUID, bogus.Size, bogus.Chunks, bogus.Digest = "EVIL", 4, 1, "SHA-256=AAAA"
	deleted := first.ObjectInfo
	deleted.Deleted = true
	wild := first.ObjectInfo
	wild.NUID = ">"
	for _, oi := range []jetstream.ObjectInfo{bogus, deleted, wild} {
		b, _ := json.Marshal(oi)
		if err := publish(metaSubj, nil, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(chunkSubj, nil, []byte("appended")); err != nil {
		t.Fatal(err)
	}
	if err := publish(s.chunkSubject("EVIL"), nil, []byte("evil")); err != nil {
		t.Fatal(err)
	}
	rc, err := bucket(s).GetObject(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != content {
		t.Fatalf("object after hostile writes: %d bytes, %v", len(got), err)
	}
	if info, err := bucket(s).StatObject(ctx, key); err != nil || info.Size != int64(len(content)) {
		t.Fatalf("stat after hostile writes: %+v %v", info, err)
	}
	var keys []string
	if err := bucket(s).ListObjects(ctx, "", func(oi ledger.ObjectInfo) error { keys = append(keys, oi.Key); return nil }); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("list after hostile writes: %v %v", keys, err)
	}
	// Putting the same content again refreshes the object's time.
	before, _ := bucket(s).StatObject(ctx, key)
	time.Sleep(10 * time.Millisecond)
	if err := bucket(s).PutObject(ctx, key, strings.NewReader(content), int64(len(content))); err != nil {
		t.Fatal(err)
	}
	if after, err := bucket(s).StatObject(ctx, key); err != nil || !after.ModTime.After(before.ModTime) {
		t.Fatalf("re-put did not refresh the time: %v then %v (%v)", before.ModTime, after.ModTime, err)
	}
	// The admin's delete purges it (even with a wildcard id in its metadata,
	// which is never used as a subject).
	other := "blobs/sha256/cd/cdef"
	if err := bucket(s).PutObject(ctx, other, strings.NewReader("kept"), 4); err != nil {
		t.Fatal(err)
	}
	if err := bucket(s).DeleteObject(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket(s).StatObject(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("stat after delete: %v", err)
	}
	if info, err := bucket(s).StatObject(ctx, other); err != nil || info.Size != 4 {
		t.Fatalf("another object after delete: %+v %v", info, err)
	}
}

// TestHarden: a bucket made by nats.go's object store (roll-ups allowed) is
// hardened, and its objects stay readable.
func TestHarden(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nc := startServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "a/b", "old"); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, Config{Conn: nc, Bucket: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Harden(ctx); err != nil || !changed {
		t.Fatalf("Harden = %v, %v", changed, err)
	}
	if changed, err := s.Harden(ctx); err != nil || changed {
		t.Fatalf("second Harden = %v, %v", changed, err)
	}
	info, err := s.stream.Info(ctx)
	if err != nil || info.Config.AllowRollup || !info.Config.DenyDelete {
		t.Fatalf("config after Harden: %+v %v", info.Config, err)
	}
	rc, err := bucket(s).GetObject(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "old" {
		t.Fatalf("legacy object reads %q", b)
	}
}

// TestManyReads reads 1,100 objects one after another, and 200 at once: more
// than nats-server's default cap of 1,000 consumers per stream. Each read
// opened an ordered consumer before (issue 26 point 11), and the 1,001st
// failed with "maximum consumers limit reached"; reads now take no consumer.
func TestManyReads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nc := startServer(t)
	s, err := New(ctx, Config{Conn: nc, Bucket: "many"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1100
	key := func(i int) string { return fmt.Sprintf("o/%04d", i) }
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			body := strings.Repeat(key(i), 1+i%3)
			return bucket(s).PutObject(ctx, key(i), strings.NewReader(body), int64(len(body)))
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	read := func(i int) error {
		r, err := bucket(s).GetObject(ctx, key(i))
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if want := strings.Repeat(key(i), 1+i%3); err == nil && string(b) != want {
			err = fmt.Errorf("%s reads %q, want %q", key(i), b, want)
		}
		return err
	}
	for i := range n {
		if err := read(i); err != nil {
			t.Fatalf("read %d of %d: %v", i+1, n, err)
		}
	}
	g.SetLimit(200)
	for i := range n {
		g.Go(func() error { return read(i) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Errorf("%d consumers left on the bucket's stream after the reads", info.State.Consumers)
	}
}

// TestListHoldsNoState: listing the bucket — its metadata read whole, on a
// bucket that allows direct gets and on one that does not (nats.go's object
// store before it did) — creates no consumer, and lists every object once.
func TestListHoldsNoState(t *testing.T) {
	t.Parallel()
	nc := startServer(t)
	ctx := t.Context()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	nobody := StreamConfig("nodirect", 1)
	nobody.AllowDirect = false
	if _, err := js.CreateStream(ctx, nobody); err != nil {
		t.Fatal(err)
	}
	var creates atomic.Int32
	spy, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	if _, err := spy.Subscribe("$JS.API.CONSUMER.>", func(m *nats.Msg) {
		if strings.Contains(m.Subject, ".CREATE.") {
			creates.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{"direct", "nodirect"} {
		s, err := New(ctx, Config{Conn: nc, Bucket: bucket})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			key := fmt.Sprintf("snapshots/u/%03d", i)
			if err := s.Put(ctx, key, strings.NewReader(key), int64(len(key))); err != nil {
				t.Fatal(err)
			}
		}
		var keys []string
		if err := s.List(ctx, "snapshots/u/01", func(oi driver.ObjectInfo) error {
			if oi.ModTime.IsZero() || oi.Size != int64(len(oi.Key)) {
				return fmt.Errorf("listed %+v", oi)
			}
			keys = append(keys, oi.Key)
			return nil
		}); err != nil {
			t.Fatalf("%s: List: %v", bucket, err)
		}
		if len(keys) != 10 || keys[0] != "snapshots/u/010" || keys[9] != "snapshots/u/019" {
			t.Fatalf("%s: List = %q", bucket, keys)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := creates.Load(); n != 0 {
		t.Fatalf("listing sent %d consumer creates, want 0", n)
	}
}

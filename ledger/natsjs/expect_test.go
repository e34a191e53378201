package natsjs

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// configError checks that err is a *ledger.ConfigError of setting, naming
// the resource and a repair.
func configError(t *testing.T, what string, err error, setting string) {
	t.Helper()
	var ce *ledger.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ledger.ErrInvalid) || ce.Setting != setting || ce.Resource == "" || ce.Repair == "" || ce.Found == ce.Want {
		t.Fatalf("%s = %v, want a *ledger.ConfigError of %s", what, err, setting)
	}
	t.Logf("%s: %v", what, err)
}

// TestOpenChecksLedgerStream: a stream that is a ledger by its metadata but
// not configured as syncledger creates one is refused, each setting named.
func TestOpenChecksLedgerStream(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		setting string
		change  func(*jetstream.StreamConfig)
	}{
		{"allow_rollup_hdrs", func(c *jetstream.StreamConfig) { c.AllowRollup = true }},
		{"deny_delete", func(c *jetstream.StreamConfig) { c.DenyDelete = false }},
		{"max_msgs_per_subject", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 }},
		{"max_bytes", func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 }},
		{"retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }},
		{"subjects", func(c *jetstream.StreamConfig) { c.Subjects = append(c.Subjects, "other.>") }},
		{"allow_direct", func(c *jetstream.StreamConfig) { c.AllowDirect = false }},
		{"allow_atomic", func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = false }},
		{"republish", func(c *jetstream.StreamConfig) { c.RePublish.HeadersOnly = true }},
		{"republish", func(c *jetstream.StreamConfig) { c.RePublish.Destination = "elsewhere.>" }},
	} {
		name := fmt.Sprintf("bad%d", i)
		l, err := newLog(nc, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := l.streamConfig(LedgerConfig{Name: name}, "6f1c2a4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f")
		tc.change(&cfg)
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("%s: %v", tc.setting, err)
		}
		_, err = OpenLog(ctx, nc, name)
		configError(t, "OpenLog("+tc.setting+")", err, tc.setting)
		_, err = CreateLog(ctx, nc, LedgerConfig{Name: name})
		configError(t, "CreateLog("+tc.setting+")", err, tc.setting)
	}
}

// TestLedgerRePublishRepair: a ledger made before its stream republished
// what it stores (as the previous release made it) still opens, its
// followers reading the head (a rolling upgrade); the admin's repair adds
// the republish and nothing else.
func TestLedgerRePublishRepair(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	l, err := newLog(nc, "old", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.streamConfig(LedgerConfig{Name: "old"}, "6f1c2a4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f")
	cfg.RePublish = nil
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, Config{Write: Endpoint{URL: srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Opened, as the previous release opened it (a rolling upgrade), its
	// followers reading the head; a republish other than this release's is
	// refused (TestOpenChecksLedgerStream).
	lg, err := c.Ledger("old").Log(ctx)
	if err != nil {
		t.Fatalf("Log(old) before the repair: %v", err)
	}
	if lg.d.republish {
		t.Fatal("Log(old) says the stream republishes")
	}
	if changed, err := c.Ledger("old").RePublish(ctx); err != nil || !changed {
		t.Fatalf("RePublish = %v, %v; want changed", changed, err)
	}
	if changed, err := c.Ledger("old").RePublish(ctx); err != nil || changed {
		t.Fatalf("RePublish again = %v, %v; want nothing to do", changed, err)
	}
	if _, err := c.Ledger("old").Log(ctx); err != nil {
		t.Fatalf("Log after the repair: %v", err)
	}
	st, err := js.Stream(ctx, StreamName("old"))
	if err != nil {
		t.Fatal(err)
	}
	got := st.CachedInfo().Config
	got.RePublish = nil
	if got.Subjects[0] != cfg.Subjects[0] || got.Metadata[MetaUUID] != cfg.Metadata[MetaUUID] || got.DenyDelete != cfg.DenyDelete || got.Duplicates != cfg.Duplicates {
		t.Errorf("the repair changed more than the republish: %+v, was %+v", got, cfg)
	}
	if _, err := c.Ledger("missing").RePublish(ctx); !errors.Is(err, ledger.ErrNoLedger) {
		t.Errorf("RePublish(missing) = %v, want ErrNoLedger", err)
	}
}

// TestOpenKVChecksBucket: a side bucket created first with other settings —
// issue 38's bucket whose keys expire after 2 s, one keeping a history, one
// allowing roll-ups as nats.go makes them — is refused when opened, and so is
// a missing one, each naming the upgrade; one as syncledger creates it opens
// with the one stream info request nats.go makes anyway.
func TestOpenKVChecksBucket(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "kv"}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bucket, setting string
		cfg             jetstream.KeyValueConfig
	}{
		{HeartbeatBucket("kv"), "max_age", jetstream.KeyValueConfig{TTL: 2 * time.Second}},
		{SwampBucket("kv"), "max_msgs_per_subject", jetstream.KeyValueConfig{History: 5}},
		{"SYNCLEDGER_ROLLUP_kv", "allow_rollup_hdrs", jetstream.KeyValueConfig{}},
	} {
		// The ledger's own buckets were made with it: gone, then made first
		// by someone else.
		if err := js.DeleteStream(ctx, KVStream(tc.bucket)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatal(err)
		}
		tc.cfg.Bucket = tc.bucket
		if _, err := js.CreateKeyValue(ctx, tc.cfg); err != nil {
			t.Fatal(err)
		}
		_, err := openKVBucket(ctx, js, "kv", tc.bucket)
		configError(t, "openKVBucket("+tc.bucket+")", err, tc.setting)
		if !strings.Contains(err.Error(), "syncledger upgrade") {
			t.Errorf("the error names no upgrade: %v", err)
		}
	}
	_, err = openKVBucket(ctx, js, "kv", "SYNCLEDGER_MISSING_kv")
	configError(t, "openKVBucket(missing)", err, "the stream")
	if _, err := openKVBucket(ctx, js, "nokv", HeartbeatBucket("nokv")); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a bucket of a ledger that does not exist: %v, want ErrNotFound", err)
	}

	// Created by syncledger, then opened by another process: one STREAM.INFO.
	good := "SYNCLEDGER_GOOD_kv"
	newBucket(t, js, "kv", good)
	spy := natsjstest.Connect(t, srv.ClientURL())
	var infos atomic.Int32
	sub, err := spy.Subscribe(apiPrefix+"STREAM.INFO.>", func(m *nats.Msg) {
		if strings.HasSuffix(m.Subject, KVStream(good)) {
			infos.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	other := natsjstest.Connect(t, srv.ClientURL())
	ojs, err := jetstream.New(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openKVBucket(ctx, ojs, "kv", good); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := infos.Load(); n != 1 {
		t.Fatalf("opening a bucket sent %d stream info requests, want 1 (the check reads nats.go's)", n)
	}
}

// TestFeedChecksDeadLetters: a dead-letter stream made first with other
// subjects (issue 38's capture of another stream's subjects) is refused, and
// so is a missing one, naming the upgrade.
func TestFeedChecksDeadLetters(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "dl"}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, DeadLetterStream("dl")); err != nil {
		t.Fatal(err)
	}
	f, err := NewFeed(nc, "dl")
	if err != nil {
		t.Fatal(err)
	}
	configError(t, "DeadLetter (missing)", f.DeadLetter(ctx, "audit", 1, []byte("{}")), "the stream")
	cfg := deadLetterConfig("dl", 1)
	cfg.Subjects = append(cfg.Subjects, "$KV.SYNCLEDGER_SWAMP_other.>")
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	configError(t, "DeadLetter", f.DeadLetter(ctx, "audit", 1, []byte("{}")), "subjects")
}

// TestClientObjectStoreChecksBucket: a bucket made by nats.go's object store
// (roll-ups allowed) is refused, naming the upgrade, and so is a missing one;
// once the admin has upgraded (or made) it, it opens.
func TestClientObjectStoreChecksBucket(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "legacy"}); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, Config{Write: Endpoint{URL: srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ObjectStore(ctx, "legacy", 1)
	configError(t, "ObjectStore(legacy)", err, "deny_delete")
	if !strings.Contains(err.Error(), "syncledger upgrade") {
		t.Errorf("the error names no repair: %v", err)
	}
	if ch, err := c.UpgradeObjectStore(ctx, "legacy", 1); err != nil || ch.Action != "changed" {
		t.Fatalf("UpgradeObjectStore = %+v, %v", ch, err)
	}
	if _, err := c.ObjectStore(ctx, "legacy", 1); err != nil {
		t.Fatalf("ObjectStore after the upgrade: %v", err)
	}
	if ch, err := c.UpgradeObjectStore(ctx, "legacy", 1); err != nil || ch.Action != "" {
		t.Fatalf("UpgradeObjectStore again = %+v, %v; want nothing done", ch, err)
	}
	_, err = c.ObjectStore(ctx, "fresh", 1)
	configError(t, "ObjectStore(fresh)", err, "the stream")
	if ch, err := c.UpgradeObjectStore(ctx, "fresh", 1); err != nil || ch.Action != "created" {
		t.Fatalf("UpgradeObjectStore(fresh) = %+v, %v", ch, err)
	}
	if _, err := c.ObjectStore(ctx, "fresh", 1); err != nil {
		t.Fatalf("ObjectStore of a new bucket: %v", err)
	}
}

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
		{"republish", func(c *jetstream.StreamConfig) { c.RePublish = nil }},
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
// what it stores (as the previous release made it) is refused, naming the
// repair; the admin's repair adds the republish and nothing else, and the
// ledger opens.
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
	_, err = c.Ledger("old").Log(ctx)
	configError(t, "Log(old)", err, "republish")
	if !strings.Contains(err.Error(), "syncledger init") {
		t.Errorf("the error names no repair: %v", err)
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
// issue 38's bucket whose keys expire after 2 s, one keeping a history — is
// refused when opened; one as syncledger creates it opens with the one stream
// info request nats.go makes anyway.
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
	} {
		tc.cfg.Bucket = tc.bucket
		if _, err := js.CreateKeyValue(ctx, tc.cfg); err != nil {
			t.Fatal(err)
		}
		_, err := openKVBucket(ctx, js, "kv", tc.bucket, "")
		configError(t, "openKVBucket("+tc.bucket+")", err, tc.setting)
	}

	// Created by syncledger, then opened by another process: one STREAM.INFO.
	good := "SYNCLEDGER_GOOD_kv"
	if _, err := openKVBucket(ctx, js, "kv", good, ""); err != nil {
		t.Fatal(err)
	}
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
	if _, err := openKVBucket(ctx, ojs, "kv", good, ""); err != nil {
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
// subjects (issue 38's capture of another stream's subjects) is refused.
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
	cfg := deadLetterConfig("dl", 1)
	cfg.Subjects = append(cfg.Subjects, "$KV.SYNCLEDGER_SWAMP_dl.>")
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	f, err := NewFeed(nc, "dl")
	if err != nil {
		t.Fatal(err)
	}
	configError(t, "DeadLetter", f.DeadLetter(ctx, "audit", 1, []byte("{}")), "subjects")
}

// TestClientObjectStoreChecksBucket: a bucket made by nats.go's object store
// (roll-ups allowed) is refused, naming the repair; once hardened, it opens.
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
	configError(t, "ObjectStore(legacy)", err, "allow_rollup_hdrs")
	if !strings.Contains(err.Error(), "syncledger init") {
		t.Errorf("the error names no repair: %v", err)
	}
	if changed, err := c.HardenObjectStore(ctx, "legacy"); err != nil || !changed {
		t.Fatalf("HardenObjectStore = %v, %v", changed, err)
	}
	if _, err := c.ObjectStore(ctx, "legacy", 1); err != nil {
		t.Fatalf("ObjectStore after hardening: %v", err)
	}
	if _, err := c.ObjectStore(ctx, "fresh", 1); err != nil {
		t.Fatalf("ObjectStore of a new bucket: %v", err)
	}
	if changed, err := c.HardenObjectStore(ctx, "missing"); err != nil || changed {
		t.Fatalf("HardenObjectStore(missing) = %v, %v; want nothing done", changed, err)
	}
}

package natsjs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// oldSideResources makes the side resources of ledger name as the release
// before issue 38 made them on first use: the buckets by nats.go's
// CreateKeyValue (roll-ups allowed), the dead letters without deny_delete
// or direct gets.
func oldSideResources(t *testing.T, js jetstream.JetStream, name string) {
	t.Helper()
	ctx := testCtx(t)
	for _, r := range sideResources(name) {
		if err := js.DeleteStream(ctx, r.stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatal(err)
		}
	}
	for _, b := range []string{HeartbeatBucket(name), SwampBucket(name)} {
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, History: 1, Storage: jetstream.FileStorage, Replicas: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: DeadLetterStream(name), Subjects: []string{DeadLetterSubject(name, ">")}, Retention: jetstream.LimitsPolicy,
		MaxMsgs: -1, MaxBytes: -1, Storage: jetstream.FileStorage, Replicas: 1, Duplicates: DuplicateWindow,
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUpgrade: the admin's upgrade makes a ledger of the release before (its
// buckets allowing roll-ups, its dead letters deletable), a bucket made first
// by someone else with a setting no update changes (a message TTL) and a
// missing one as syncledger makes them — the TTL bucket anew with its keys —
// and changes nothing when run again.
func TestUpgrade(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "up"}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	oldSideResources(t, js, "up")
	// The swamp bucket made first by someone else: keys that expire.
	if err := js.DeleteStream(ctx, KVStream(SwampBucket("up"))); err != nil {
		t.Fatal(err)
	}
	sw, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: SwampBucket("up"), TTL: time.Hour, LimitMarkerTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Put(ctx, "control.vault", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Put(ctx, "gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := sw.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, DeadLetterStream("up")); err != nil {
		t.Fatal(err)
	}

	c, err := Open(ctx, Config{Write: Endpoint{URL: srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hb, _ := c.Ledger("up").Heartbeats()
	_, err = hb.List(ctx, "")
	configError(t, "heartbeats before the upgrade", err, "allow_rollup_hdrs")

	changes, err := c.Ledger("up").Upgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ stream, action string }{
		{"SYNCLEDGER_up", ""}, {"KV_SYNCLEDGER_HOSTS_up", "changed"}, {"KV_SYNCLEDGER_SWAMP_up", "made anew"}, {"SYNCLEDGER-DLQ_up", "created"},
	}
	if len(changes) != len(want) {
		t.Fatalf("Upgrade = %+v, want %d changes", changes, len(want))
	}
	for i, ch := range changes {
		t.Logf("%+v", ch)
		if !strings.Contains(ch.Resource, "(stream "+want[i].stream+")") || ch.Action != want[i].action {
			t.Errorf("change %d = %+v, want %s %q", i, ch, want[i].stream, want[i].action)
		}
	}
	for _, r := range append(sideResources("up"), ledgerStream("up")) {
		st, err := js.Stream(ctx, r.stream)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.checkConfig(st.CachedInfo().Config); err != nil {
			t.Errorf("after the upgrade: %v", err)
		}
	}
	swamp, err := c.Ledger("up").SwampKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := swamp.Get(ctx, "control.vault"); err != nil || string(e.Value) != "secret" {
		t.Errorf("the swamp bucket's key after it was made anew: %+v, %v", e, err)
	}
	if _, err := swamp.Get(ctx, "gone"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a deleted key after the bucket was made anew: %v, want not found", err)
	}
	if _, err := hb.List(ctx, ""); err != nil {
		t.Errorf("heartbeats after the upgrade: %v", err)
	}
	again, err := c.Ledger("up").Upgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range again {
		if ch.Action != "" {
			t.Errorf("a second upgrade changed %+v", ch)
		}
	}
	if _, err := c.Ledger("nosuch").Upgrade(ctx); !errors.Is(err, ledger.ErrNoLedger) {
		t.Errorf("Upgrade of a missing ledger: %v, want ErrNoLedger", err)
	}
}

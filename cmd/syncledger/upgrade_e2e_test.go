package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger/natsjs"
)

// rigPermissions is the authorization block this build renders for the
// rig's users (newRig's: ops, web, web2, grafana running audit), passwords
// in place.
func rigPermissions(t *testing.T) string {
	t.Helper()
	r := cli(t, cliEnv(), "config", "permissions", "--user", "ops:admin", "--user", "web:host", "--user", "web2:host", "--user", "grafana:tooling:audit")
	if r.code != 0 {
		t.Fatalf("config permissions: %+v", r)
	}
	out := r.stdout
	for v, pw := range map[string]string{"OPS": "ops-pw", "WEB": "web-pw", "WEB2": "web2-pw", "GRAFANA": "graf-pw"} {
		out = strings.ReplaceAll(out, "$SYNCLEDGER_PASSWORD_"+v+"}", `"`+pw+`"}`)
		out = strings.ReplaceAll(out, "$SYNCLEDGER_PASSWORD_"+v+",", `"`+pw+`",`)
	}
	return out
}

// TestUpgradeFromPreviousCLI: a ledger whose resources are as the release
// before made them — its heartbeat and swamp buckets by nats.go's key-value
// store (roll-ups allowed), its dead letters deletable and without direct
// gets, its object store bucket by nats.go's object store — on a server with
// this build's permissions. A host of this build refuses it, naming the
// upgrade; the admin's `syncledger upgrade` (one command) makes every
// resource so, keeping the swamp bucket's keys and changing nothing when run
// again; then every role works and every breach of issue 38's items 1–5 is
// refused.
func TestUpgradeFromPreviousCLI(t *testing.T) {
	t.Parallel()
	r := rigOn(t, serverWithPermissions(t, rigPermissions(t)))
	admin := r.attacker("admin")
	ctx := t.Context()
	if _, err := natsjs.CreateLog(ctx, admin.nc, natsjs.LedgerConfig{Name: rigLedger, Blobs: "nats://" + rigBucket}); err != nil {
		t.Fatal(err)
	}
	// The release before made the side resources on first use, so.
	for _, st := range []string{natsjs.KVStream(natsjs.HeartbeatBucket(rigLedger)), natsjs.KVStream(natsjs.SwampBucket(rigLedger)), natsjs.DeadLetterStream(rigLedger)} {
		if err := admin.js.DeleteStream(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	var swamp jetstream.KeyValue
	for _, b := range []string{natsjs.HeartbeatBucket(rigLedger), natsjs.SwampBucket(rigLedger)} {
		kv, err := admin.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, History: 1, Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		swamp = kv
	}
	if _, err := swamp.Put(ctx, "control.vault", []byte("vault")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.js.CreateStream(ctx, jetstream.StreamConfig{Name: natsjs.DeadLetterStream(rigLedger),
		Subjects: []string{natsjs.DeadLetterSubject(rigLedger, ">")}, MaxMsgs: -1, MaxBytes: -1, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: rigBucket}); err != nil {
		t.Fatal(err)
	}

	// A host of this build refuses the ledger, naming the upgrade.
	cache := r.dir + "/web-1"
	put(t, cache, "audit/a", "a")
	res := cli(t, r.host, "--cache", cache, "commit", "-m", "before", "--json")
	var e struct {
		Error struct {
			Message  string   `json:"message"`
			Commands []string `json:"commands"`
		} `json:"error"`
	}
	if res.code == 0 || json.Unmarshal([]byte(res.stdout), &e) != nil || len(e.Error.Commands) != 1 || !strings.HasPrefix(e.Error.Commands[0], "syncledger upgrade") {
		t.Fatalf("a host of this build on the ledger before its upgrade: %+v; want a failure whose way out is syncledger upgrade", res)
	}
	t.Logf("before the upgrade: %s", e.Error.Message)

	out := r.ok(r.admin, "upgrade")
	t.Logf("upgrade:\n%s", out)
	for _, want := range []string{"KV_SYNCLEDGER_HOSTS_default): changed", "KV_SYNCLEDGER_SWAMP_default): changed", "SYNCLEDGER-DLQ_default): changed", "OBJ_syncledger-default): changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade's report lacks %q", want)
		}
	}
	again := r.ok(r.admin, "upgrade")
	if strings.Contains(again, "changed") || strings.Contains(again, "created") || strings.Contains(again, "anew") {
		t.Errorf("a second upgrade changed something:\n%s", again)
	}
	if e, err := swamp.Get(ctx, "control.vault"); err != nil || string(e.Value()) != "vault" {
		t.Errorf("the swamp bucket's key after the upgrade: %v %v", e, err)
	}

	// Every role works.
	r.ok(r.host, "--cache", cache, "commit", "-m", "after")
	r.ok(r.host, "--cache", cache, "sync")
	if out := r.ok(r.tool, "log"); !strings.Contains(out, "after") {
		t.Errorf("the tooling user's log after the upgrade:\n%s", out)
	}
	// And every breach is refused.
	for _, b := range []struct {
		name string
		fn   func(*testing.T, *rig)
	}{
		{"1", breachBucketMadeFirst}, {"2", breachDeadLetterCapture}, {"3", breachDurableRefilter},
		{"4", breachThousandDurables}, {"5", breachRollup},
	} {
		t.Run("item"+b.name, func(t *testing.T) {
			rr := *r
			rr.t = t
			b.fn(t, &rr)
		})
	}
}

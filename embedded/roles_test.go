package embedded

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/embedded/embeddedtest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
	"github.com/syncledger/syncledger/projector/snapshot"
	"github.com/syncledger/syncledger/swamp/agent"
)

// TestThreatModel is docs/ops.md's threat-model table, row by row, from the
// attacker's side: each role (admin, host, tooling) tries each operation on
// each resource — the stream and its commits, blobs in the object store,
// snapshots, object metadata, durable consumers, the heartbeat and swamp
// key-value buckets — and the server (or, where the server allows the write,
// the readers) decides as the table says. TestNoRoleDestroysContent sends
// every destructive message besides; the audit consumer's refusal past a moved
// position is consumers/audit's TestRefusesGap.
func TestThreatModel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const name, bucket = "threat", "syncledger-threat"
	scope := natsauth.Scope{Ledger: name, ObjectBucket: bucket}
	toolScope := scope
	toolScope.Consumers = []string{"audit"} // the tooling user runs the audit consumer
	hostKey := embeddedtest.NewNkey(t)
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), User: "admin", Password: "admin-pw",
		Users: []User{
			{Nkey: hostKey.Public, Permissions: perms(t, natsauth.RoleHost, scope)},
			{Name: "tool", Password: "tool-pw", Permissions: perms(t, natsauth.RoleTooling, toolScope)},
		}})
	hostNkey, err := nats.NkeyOptionFromSeed(writeSeed(t, hostKey.Seed))
	if err != nil {
		t.Fatal(err)
	}
	login := map[string]nats.Option{"admin": nats.UserInfo("admin", "admin-pw"), "host": hostNkey, "tooling": nats.UserInfo("tool", "tool-pw")}

	// The admin makes the ledger, its bucket, a commit with its blob, an
	// attested snapshot and a durable consumer.
	admin := connectT(t, s, nil, login["admin"])
	al, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: name, UUID: "0190b0a1-0000-4000-8000-000000000003", Blobs: "nats://" + bucket})
	if err != nil {
		t.Fatal(err)
	}
	aobjsDrv, err := natsblob.New(ctx, natsblob.Config{Conn: admin, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	aobjs := ledger.NewBucket(aobjsDrv, ledger.RetryPolicy{Attempts: 1})
	content := []byte("the content of audit/one")
	d, err := ledger.PutBytes(ctx, aobjs, content)
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, al.UUID(), "h1", "audit/one", ledger.Record{})
	ev.Entries[0].SHA256, ev.Entries[0].Size = d, int64(len(content))
	if _, err := al.Append(ctx, []ledger.Event{ev}); err != nil {
		t.Fatal(err)
	}
	scfg := snapshot.Config{Log: al, Blobs: aobjs, Objects: aobjs}
	taken, err := snapshot.Take(ctx, scfg, snapshot.TakeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"audit", "webhook"} {
		if _, err := ajs.CreateConsumer(ctx, ledger.StreamName(name), jetstream.ConsumerConfig{Durable: c, AckPolicy: jetstream.AckAllPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	if err := putBeat(ctx, admin, name, heartbeat.Beat{Host: "h1", HWM: 1, Head: 1}); err != nil {
		t.Fatal(err)
	}
	// The ledger's buckets and dead letters are made with it (the swamp
	// bucket included).

	type conn struct {
		nc  *nats.Conn
		v   *violations
		log *natsjs.Log
		obj *ledger.Bucket
	}
	// Each row gets connections of its own: a refusal is reported on the
	// connection, and one row's must not answer for another's.
	open := func(role string) conn {
		t.Helper()
		v := newViolations()
		nc := connectT(t, s, v, login[role])
		l, err := natsjs.OpenLog(ctx, nc, name, natsjs.WithTimeout(500*time.Millisecond), natsjs.WithRetry(1, 0))
		if err != nil {
			t.Fatalf("%s opens the ledger: %v", role, err)
		}
		o, err := natsblob.New(ctx, natsblob.Config{Conn: nc, Bucket: bucket})
		if err != nil {
			t.Fatalf("%s opens the bucket: %v", role, err)
		}
		return conn{nc, v, l, ledger.NewBucket(o, ledger.RetryPolicy{Attempts: 1})}
	}
	// request sends a JetStream API request and returns the server's answer
	// error, or the permissions violation it got instead.
	request := func(c conn, subj string, body []byte) error {
		t.Helper()
		m, err := c.nc.Request(subj, body, 500*time.Millisecond)
		if err != nil {
			return c.v.wait(t, `"`+subj+`"`)
		}
		var resp struct {
			Error *jetstream.APIError `json:"error"`
		}
		if json.Unmarshal(m.Data, &resp) == nil && resp.Error != nil {
			return resp.Error
		}
		return nil
	}
	refused := func(err error) bool {
		return errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, ledger.ErrPermission)
	}
	forged := func() []byte { // a well-formed snapshot that forgets audit/one, at a later seq
		var b bytes.Buffer
		if err := snapshot.Encode(&b, &snapshot.Snapshot{Ledger: al.UUID(), Name: name, Seq: 5}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}()

	rows := []struct {
		role, resource, action string
		allowed                bool
		try                    func(c conn) error
	}{
		{"host", "stream", "append a commit", true, func(c conn) error {
			head, err := c.log.PartitionHead(ctx, "audit")
			if err != nil {
				return err
			}
			_, err = c.log.Append(ctx, []ledger.Event{event(t, c.log.UUID(), "h1", "audit/two", head)})
			return err
		}},
		{"tooling", "stream", "append a commit", false, func(c conn) error {
			_, err := c.log.Append(ctx, []ledger.Event{event(t, c.log.UUID(), "t", "data/x/y/z/w", ledger.Record{})})
			return err
		}},
		{"host", "stream", "purge", false, func(c conn) error { return request(c, "$JS.API.STREAM.PURGE."+ledger.StreamName(name), nil) }},
		{"tooling", "stream", "purge", false, func(c conn) error { return request(c, "$JS.API.STREAM.PURGE."+ledger.StreamName(name), nil) }},
		{"host", "blobs", "put a blob", true, func(c conn) error {
			_, err := ledger.PutBytes(ctx, c.obj, []byte("a host's blob"))
			return err
		}},
		{"tooling", "blobs", "put a blob", false, func(c conn) error {
			// A put's first step, a chunk (waiting out a put's acknowledgements takes 30 s).
			if err := c.nc.Publish("$O."+bucket+".C.TOOL", []byte("x")); err != nil {
				return err
			}
			return c.v.wait(t, `"$O.`+bucket+`.C.TOOL"`)
		}},
		{"host", "blobs", "purge the bucket", false, func(c conn) error { return request(c, "$JS.API.STREAM.PURGE."+natsblob.StreamName(bucket), nil) }},
		{"admin", "snapshots", "attest a snapshot", true, func(c conn) error { return c.log.AttestSnapshot(ctx, taken.Info.Seq, taken.Info.SHA256) }},
		{"host", "snapshots", "attest a forged snapshot", false, func(c conn) error {
			if err := c.obj.PutObject(ctx, snapshot.Key(al.UUID(), 5), bytes.NewReader(forged), int64(len(forged))); err != nil {
				t.Errorf("the host stores a snapshot object: %v", err) // allowed: an object like any other
			}
			return c.log.AttestSnapshot(ctx, 5, ledger.DigestOf(forged))
		}},
		{"tooling", "snapshots", "attest a forged snapshot", false, func(c conn) error { return c.log.AttestSnapshot(ctx, 5, ledger.DigestOf(forged)) }},
		{"host", "snapshots", "raise the retention bound", false, func(c conn) error { return c.log.AttestRetention(ctx, 2) }},
		{"host", "object metadata", "squat a blob key", true, func(c conn) error {
			squat := []byte("predictable content")
			key := ledger.BlobKey(ledger.DigestOf(squat))
			oi := jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{Name: key}, Bucket: bucket, NUID: "NONE", Size: uint64(len(squat)), Chunks: 1}
			b, _ := json.Marshal(oi)
			if err := c.nc.Publish("$O."+bucket+".M."+base64.URLEncoding.EncodeToString([]byte(key)), b); err != nil {
				return err
			}
			return c.nc.Flush()
		}},
		{"admin", "consumers", "delete a durable consumer", true, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.DELETE."+ledger.StreamName(name)+".webhook", nil)
		}},
		{"host", "consumers", "delete a durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.DELETE."+ledger.StreamName(name)+".audit", nil)
		}},
		{"host", "consumers", "reset a durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.RESET."+ledger.StreamName(name)+".audit", []byte(`{"seq":2}`))
		}},
		{"tooling", "consumers", "delete a durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.DELETE."+ledger.StreamName(name)+".audit", nil)
		}},
		{"tooling", "consumers", "reset its own durable consumer", true, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.RESET."+ledger.StreamName(name)+".audit", nil)
		}},
		{"tooling", "consumers", "fetch from its own durable consumer", true, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.MSG.NEXT."+ledger.StreamName(name)+".audit", []byte(`{"batch":1,"no_wait":true}`))
		}},
		{"tooling", "consumers", "reset another's durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.RESET."+ledger.StreamName(name)+".webhook", nil)
		}},
		{"tooling", "consumers", "fetch from another's durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.MSG.NEXT."+ledger.StreamName(name)+".webhook", []byte(`{"batch":1,"no_wait":true}`))
		}},
		{"host", "consumers", "fetch from a durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.MSG.NEXT."+ledger.StreamName(name)+".audit", []byte(`{"batch":1,"no_wait":true}`))
		}},
		{"host", "consumers", "create (update) a durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.CREATE."+ledger.StreamName(name)+".audit", []byte(`{"stream_name":"`+ledger.StreamName(name)+`","config":{"durable_name":"audit","ack_policy":"all"}}`))
		}},
		{"tooling", "consumers", "create (update) a durable consumer", false, func(c conn) error {
			return request(c, "$JS.API.CONSUMER.CREATE."+ledger.StreamName(name)+".audit", []byte(`{"stream_name":"`+ledger.StreamName(name)+`","config":{"durable_name":"audit","ack_policy":"all"}}`))
		}},
		{"host", "swamp locks", "create the bucket", false, func(c conn) error {
			return request(c, "$JS.API.STREAM.CREATE.KV_"+agent.Bucket(name)+"x", []byte(`{"name":"KV_`+agent.Bucket(name)+`x"}`))
		}},
		{"tooling", "dead letters", "create the stream", false, func(c conn) error {
			return request(c, "$JS.API.STREAM.CREATE."+natsjs.DeadLetterStream(name)+"x", []byte(`{"name":"`+natsjs.DeadLetterStream(name)+`x"}`))
		}},
		{"host", "heartbeats", "put its heartbeat", true, func(c conn) error {
			return putBeat(ctx, c.nc, name, heartbeat.Beat{Host: "h1", HWM: 1, Head: 1})
		}},
		{"tooling", "heartbeats", "put a heartbeat", false, func(c conn) error {
			if err := c.nc.Publish("$KV."+natsjs.HeartbeatBucket(name)+".t", []byte("{}")); err != nil {
				return err
			}
			return c.v.wait(t, `"$KV.`+natsjs.HeartbeatBucket(name)+`.t"`)
		}},
		{"host", "heartbeats", "purge the bucket", false, func(c conn) error {
			return request(c, "$JS.API.STREAM.PURGE.KV_"+natsjs.HeartbeatBucket(name), nil)
		}},
		{"tooling", "swamp locks", "take a lock", false, func(c conn) error {
			if err := c.nc.Publish("$KV."+agent.Bucket(name)+".lock", []byte("{}")); err != nil {
				return err
			}
			return c.v.wait(t, `"$KV.`+agent.Bucket(name)+`.lock"`)
		}},
		{"host", "swamp locks", "purge the bucket", false, func(c conn) error {
			return request(c, "$JS.API.STREAM.PURGE.KV_"+agent.Bucket(name), nil)
		}},
		// A lock's fence (ledger.Fence): a host stores fence records (its
		// commits' grant, syncledger.<ledger>.p.>); it cannot delete one, so
		// a lock's last fence record only ever moves forward.
		{"host", "fences", "store a fence record", true, func(c conn) error {
			_, err := c.log.TakeFence(ctx, fenceRecord(t, c.log.UUID(), "data/m/host/.lock", "h1"))
			return err
		}},
		{"tooling", "fences", "store a fence record", false, func(c conn) error {
			_, err := c.log.TakeFence(ctx, fenceRecord(t, c.log.UUID(), "data/m/tool/.lock", "t"))
			return err
		}},
		{"host", "fences", "delete a fence record", false, func(c conn) error {
			return request(c, "$JS.API.STREAM.MSG.DELETE."+ledger.StreamName(name), []byte(`{"seq":1}`))
		}},
	}
	var wg sync.WaitGroup // a refusal waits out a request's timeout: the rows run at once
	for _, r := range rows {
		c := open(r.role)
		wg.Go(func() {
			err := r.try(c)
			switch {
			case r.allowed && err != nil:
				t.Errorf("%s may %s (%s): %v", r.role, r.action, r.resource, err)
			case !r.allowed && !refused(err):
				t.Errorf("%s may not %s (%s): got %v, want a refusal", r.role, r.action, r.resource, err)
			}
		})
	}
	wg.Wait()

	// What the allowed writes cannot do: the forged snapshot is never read
	// (the newest attested one is), and the squatted key does not stop an
	// honest put of its content, which every reader then reads.
	host := open("host")
	got, info, err := snapshot.Select(ctx, host.log, host.obj, al.UUID(), nil, nil)
	if err != nil || info.Seq != taken.Info.Seq || len(got.Entries) != 1 {
		t.Errorf("a host selects %v (%+v), want the attested snapshot at %d holding audit/one", err, info, taken.Info.Seq)
	}
	if _, floor, err := snapshot.Floor(ctx, host.log); err != nil || floor != 1 {
		t.Errorf("floor after the host's attempts: %d %v, want 1", floor, err)
	}
	squat := []byte("predictable content")
	sd, err := ledger.PutBytes(ctx, host.obj, squat)
	if err != nil {
		t.Fatalf("honest put over the squatted key: %v", err)
	}
	if b, err := ledger.ReadBlob(ctx, aobjs, sd); err != nil || !bytes.Equal(b, squat) {
		t.Errorf("a reader of the squatted key after the honest put: %q %v", b, err)
	}
	// A host that forges another holder's fence record (it may: fence records
	// share the commits' grant) makes that holder's next commit fail with a
	// lost lock, storing nothing — never the other way: the lock's last
	// record only moves forward, so no forgery makes a lapsed fence hold again.
	victim := open("host")
	fv, err := victim.log.TakeFence(ctx, fenceRecord(t, al.UUID(), "data/m/victim/.lock", "victim"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.log.TakeFence(ctx, fenceRecord(t, al.UUID(), "data/m/victim/.lock", "forger")); err != nil {
		t.Fatal(err)
	}
	before, _ := victim.log.LastSeq(ctx)
	head, err := victim.log.PartitionHead(ctx, "audit")
	if err != nil {
		t.Fatal(err)
	}
	_, err = victim.log.Append(ctx, []ledger.Event{event(t, al.UUID(), "victim", "audit/three", head)}, ledger.Fence{Lock: "data/m/victim/.lock", Seq: fv})
	var ll *ledger.LockLostError
	if !errors.As(err, &ll) || ll.Taker == nil || ll.Taker.Host != "forger" {
		t.Errorf("a commit under a fence a forged record passed: %v, want a lost lock naming the forger", err)
	}
	if after, _ := victim.log.LastSeq(ctx); after != before {
		t.Errorf("the refused commit stored something: last seq %d, was %d", after, before)
	}

	// The host's attempts on the consumers left them as they were; the admin's
	// delete went through.
	if _, err := ajs.Consumer(ctx, ledger.StreamName(name), "audit"); err != nil {
		t.Errorf("the audit consumer after the attempts: %v", err)
	}
	if _, err := ajs.Consumer(ctx, ledger.StreamName(name), "webhook"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the webhook consumer after the admin's delete: %v", err)
	}
}

package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/embedded/embeddedtest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// TestNoRoleDestroysContent: the host and tooling roles send every message they
// could use against stored content — purges, deletes, message deletes, stream
// updates, roll-ups, TTLs, key-value purges, object metadata marking a blob
// deleted or pointing elsewhere — to every subject their permissions allow and
// to every destructive JetStream API subject; afterwards every commit of the
// ledger and every blob reads back unchanged, and neither stream's settings
// changed.
func TestNoRoleDestroysContent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const name, bucket = "destroy", "syncledger-destroy"
	scope := natsauth.Scope{Ledger: name, ObjectBucket: bucket}
	hostKey := embeddedtest.NewNkey(t)
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), User: "admin", Password: "admin-pw",
		Users: []User{
			{Nkey: hostKey.Public, Permissions: perms(t, natsauth.RoleHost, scope)},
			{Name: "tool", Password: "tool-pw", Permissions: perms(t, natsauth.RoleTooling, scope)},
		}})
	connect := func(opts ...nats.Option) *nats.Conn {
		t.Helper()
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.MaxReconnects(0), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	admin := connect(nats.UserInfo("admin", "admin-pw"))
	hostNkey, err := nats.NkeyOptionFromSeed(writeSeed(t, hostKey.Seed))
	if err != nil {
		t.Fatal(err)
	}
	hc := connect(hostNkey)
	tc := connect(nats.UserInfo("tool", "tool-pw"))

	// The admin creates the ledger and its bucket; the host commits and stores
	// blobs and its heartbeat.
	if _, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: name, UUID: "0190b0a1-0000-4000-8000-000000000002", Blobs: "nats://" + bucket}); err != nil {
		t.Fatal(err)
	}
	if _, err := natsblob.New(ctx, natsblob.Config{Conn: admin, Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	hl, err := natsjs.OpenLog(ctx, hc, name)
	if err != nil {
		t.Fatal(err)
	}
	hobjsDrv, err := natsblob.New(ctx, natsblob.Config{Conn: hc, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	hobjs := ledger.NewBucket(hobjsDrv, ledger.RetryPolicy{Attempts: 1})
	blobs := map[string][]byte{}
	var prev ledger.Record
	for i, path := range []string{"audit/one", "audit/two", "data/x/y/z/raw"} {
		content := bytes.Repeat([]byte{byte('a' + i)}, (i+1)*100<<10) // up to three chunks
		key := ledger.BlobKey(ledger.DigestOf(content))
		if err := hobjs.PutObject(ctx, key, bytes.NewReader(content), int64(len(content))); err != nil {
			t.Fatal(err)
		}
		blobs[key] = content
		if ledger.PartitionKey(path) != "audit" {
			prev = ledger.Record{}
		}
		seqs, err := hl.Append(ctx, []ledger.Event{event(t, hl.UUID(), "h1", path, prev)})
		if err != nil {
			t.Fatal(err)
		}
		prev = ledger.Record{Seq: seqs[0], Event: ledger.Event{ModelSeq: uint64(i + 1)}}
	}
	if err := putBeat(ctx, hc, name, heartbeat.Beat{Host: "h1", HWM: 3, Head: 3}); err != nil {
		t.Fatal(err)
	}

	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{ledger.StreamName(name), natsblob.StreamName(bucket), natsjs.KVStream(natsjs.HeartbeatBucket(name)), natsjs.DeadLetterStream(name)}
	type snapshot struct {
		config string
		msgs   map[uint64]string // seq → subject and data
	}
	// take records, for the ledger's and the bucket's streams, their settings
	// and every message.
	take := func() map[string]snapshot {
		t.Helper()
		out := map[string]snapshot{}
		for _, sn := range streams[:2] {
			st, err := ajs.Stream(ctx, sn)
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := json.Marshal(info.Config)
			snap := snapshot{config: string(cfg), msgs: map[uint64]string{}}
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
				m, err := st.GetMsg(ctx, seq)
				if err != nil {
					t.Fatalf("%s seq %d: %v", sn, seq, err)
				}
				snap.msgs[seq] = m.Subject + "\n" + string(m.Data)
			}
			out[sn] = snap
		}
		return out
	}
	before := take()

	// The subjects: every allowed publish subject of both roles, with its
	// wildcards filled in with every token that names something stored, and
	// every JetStream API subject that changes a stream.
	var metaTokens, chunkTokens []string
	for key := range blobs {
		metaTokens = append(metaTokens, base64.URLEncoding.EncodeToString([]byte(key)))
	}
	for _, m := range before[natsblob.StreamName(bucket)].msgs {
		subj, data, _ := strings.Cut(m, "\n")
		if strings.Contains(subj, ".M.") {
			var oi jetstream.ObjectInfo
			if json.Unmarshal([]byte(data), &oi) == nil {
				chunkTokens = append(chunkTokens, oi.NUID)
			}
		}
	}
	tokens := append(append([]string{"audit", "data--x--y", "h1", "x", "x.y", "c1", "c1.x"}, metaTokens...), chunkTokens...)
	for _, st := range streams {
		tokens = append(tokens, st, st+".c1", st+".c1.x")
	}
	var subjects []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			subjects = append(subjects, s)
		}
	}
	roles := map[string]*natsauth.Permissions{"host": perms(t, natsauth.RoleHost, scope), "tooling": perms(t, natsauth.RoleTooling, scope)}
	for _, p := range roles {
		for _, pat := range p.Publish.Allow {
			for _, s := range fill(pat, tokens) {
				add(s)
			}
		}
	}
	for _, op := range []string{"STREAM.PURGE", "STREAM.DELETE", "STREAM.UPDATE", "STREAM.MSG.DELETE", "STREAM.CREATE"} {
		for _, st := range streams {
			add("$JS.API." + op + "." + st)
		}
	}
	// Every allowed pattern got at least one subject.
	for role, p := range roles {
		for _, pat := range p.Publish.Allow {
			n := 0
			for _, s := range subjects {
				if subjectMatches(pat, s) {
					n++
				}
			}
			if n == 0 {
				t.Fatalf("%s: no subject tried for allowed %q", role, pat)
			}
		}
	}

	// The messages: to the JetStream API, requests that purge, delete or
	// reconfigure; to any other subject, headers and bodies that roll up, expire
	// or replace what is stored.
	var api, bodies [][]byte
	api = append(api, []byte("{}"), []byte(`{"filter":">"}`), []byte(`{"keep":0}`), []byte(`{"seq":100000}`))
	for _, sn := range streams {
		for _, subj := range []string{">", "$O." + bucket + ".C.>", "$O." + bucket + ".M.>"} {
			api = append(api, fmt.Appendf(nil, `{"filter":%q}`, subj))
		}
		if snap, ok := before[sn]; ok {
			var cfg jetstream.StreamConfig
			_ = json.Unmarshal([]byte(snap.config), &cfg)
			cfg.AllowRollup, cfg.DenyDelete, cfg.DenyPurge, cfg.MaxMsgs, cfg.MaxAge, cfg.AllowMsgTTL = true, false, false, 1, time.Second, true
			b, _ := json.Marshal(cfg)
			api = append(api, b)
		}
	}
	for seq := 1; seq <= 12; seq++ {
		api = append(api, fmt.Appendf(nil, `{"seq":%d}`, seq), fmt.Appendf(nil, `{"seq":%d,"no_erase":true}`, seq))
	}
	bodies = append(bodies, []byte("{}"))
	for _, m := range before[ledger.StreamName(name)].msgs {
		_, data, _ := strings.Cut(m, "\n")
		bodies = append(bodies, []byte(data)) // a commit again
	}
	for _, m := range before[natsblob.StreamName(bucket)].msgs {
		subj, data, _ := strings.Cut(m, "\n")
		if strings.Contains(subj, ".M.") {
			var oi jetstream.ObjectInfo
			_ = json.Unmarshal([]byte(data), &oi)
			oi.Deleted = true
			b, _ := json.Marshal(oi)
			bodies = append(bodies, b)
			oi.Deleted, oi.NUID, oi.Size, oi.Chunks, oi.Digest = false, "EVIL", 4, 1, "SHA-256=AAAA"
			b, _ = json.Marshal(oi)
			bodies = append(bodies, b)
		}
	}
	headers := []nats.Header{
		nil,
		{"Nats-Rollup": []string{"all"}},
		{"Nats-Rollup": []string{"sub"}},
		{"KV-Operation": []string{"PURGE"}, "Nats-Rollup": []string{"sub"}},
		{"Nats-TTL": []string{"1s"}},
		{"Nats-Expected-Last-Sequence": []string{"0"}},
	}

	// The two roles attack at once, each on its own connection.
	var sent [2]int
	var attack errgroup.Group
	for i, c := range []*nats.Conn{hc, tc} {
		attack.Go(func() error {
			inbox := c.NewRespInbox()
			replies, err := c.SubscribeSync(inbox)
			if err != nil {
				return err
			}
			defer replies.Unsubscribe()
			for _, subj := range subjects {
				hs, bs := headers, bodies
				if strings.HasPrefix(subj, "$JS.API.") {
					hs, bs = headers[:1], api
				}
				for _, h := range hs {
					for _, b := range bs {
						m := &nats.Msg{Subject: subj, Reply: inbox, Data: b}
						if h != nil {
							m.Header = h
						}
						if err := c.PublishMsg(m); err != nil {
							return err
						}
						sent[i]++
					}
				}
				if err := c.Flush(); err != nil {
					return err
				}
			}
			// Let the server answer everything it accepted.
			for {
				if _, err := replies.NextMsg(2 * time.Second); err != nil {
					return nil
				}
			}
		})
	}
	if err := attack.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d messages to %d subjects as host and tooling", sent[0]+sent[1], len(subjects))

	after := take()
	for sn, b := range before {
		a := after[sn]
		if a.config != b.config {
			t.Errorf("stream %s settings changed:\n%s\n%s", sn, b.config, a.config)
		}
		for seq, m := range b.msgs {
			if a.msgs[seq] != m {
				t.Errorf("stream %s seq %d changed or gone", sn, seq)
			}
		}
	}
	var read []ledger.Record
	al, err := natsjs.OpenLog(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := al.Read(ctx, 1, 3, func(r ledger.Record) error { read = append(read, r); return nil }); err != nil || len(read) != 3 {
		t.Fatalf("the ledger's commits after the attack: %d read, %v", len(read), err)
	}
	aobjsDrv, err := natsblob.New(ctx, natsblob.Config{Conn: admin, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	aobjs := ledger.NewBucket(aobjsDrv, ledger.RetryPolicy{Attempts: 1})
	for key, want := range blobs {
		rc, err := aobjs.GetObject(ctx, key)
		if err != nil {
			t.Errorf("blob %s after the attack: %v", key, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("blob %s after the attack: %d bytes, %v", key, len(got), err)
		}
	}
	// And a new host still syncs: the blob store lists them all.
	n := 0
	if err := aobjs.ListObjects(context.Background(), ledger.BlobPrefix, func(ledger.ObjectInfo) error { n++; return nil }); err != nil || n != len(blobs) {
		t.Errorf("listing after the attack: %d blobs, %v", n, err)
	}
}

// fill returns the subjects pat names with its wildcards replaced by tokens.
func fill(pat string, tokens []string) []string {
	parts := strings.Split(pat, ".")
	out := []string{""}
	for i, p := range parts {
		var next []string
		for _, prefix := range out {
			sep := "."
			if i == 0 {
				sep = ""
			}
			switch p {
			case "*", ">":
				for _, tok := range tokens {
					if p == "*" && strings.Contains(tok, ".") {
						continue
					}
					next = append(next, prefix+sep+tok)
				}
			default:
				next = append(next, prefix+sep+p)
			}
		}
		out = next
	}
	return out
}

// subjectMatches is NATS subject matching: * one token, > one or more.
func subjectMatches(pat, subj string) bool {
	p, s := strings.Split(pat, "."), strings.Split(subj, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

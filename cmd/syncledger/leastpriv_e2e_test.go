package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// Issue 38's items 1–5 from the attacker's side: serve with a user of each
// role (the tooling user runs the audit consumer), and the host or tooling
// credential driving the raw nats.go client — every JetStream API request the
// class takes, with hostile bodies — against every resource of the ledger.
// Each test fails on the release before (480bfbd), whose host and tooling
// roles created streams and consumers and whose buckets took roll-ups.

// rig is serve with users of each role, and the command environments of each.
type rig struct {
	t                 *testing.T
	dir, url          string
	admin, host, tool []string
	srv               *proc
}

const (
	rigLedger = "default"
	rigBucket = "syncledger-default"
)

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	users := writeFile(t, filepath.Join(dir, "users.yaml"), `users:
  - {user: ops, password: ops-pw, role: admin}
  - {user: web, password: web-pw, role: host}
  - {user: web2, password: web2-pw, role: host}
  - {user: grafana, password: graf-pw, role: tooling, consumers: [audit]}
`)
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users), "--listen", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data"), "--blobs", "nats://"+rigBucket)
	t.Cleanup(func() { srv.stop(t, syscall.SIGTERM) })
	r := rigOn(t, info.URL)
	r.dir, r.srv = dir, srv
	return r
}

// rigOn is a rig on the server at url, whose users are serve's of newRig.
func rigOn(t *testing.T, url string) *rig {
	env := func(extra ...string) []string {
		return cliEnv(append([]string{"SYNCLEDGER_NATS=" + url, "SYNCLEDGER_LOG_LEVEL=warn"}, extra...)...)
	}
	return &rig{t: t, dir: t.TempDir(), url: url,
		admin: env("NATS_USER=ops", "NATS_PASSWORD=ops-pw"),
		host:  env("NATS_USER=web", "NATS_PASSWORD=web-pw", "SYNCLEDGER_HOST=web-1"),
		tool:  env("NATS_USER=grafana", "NATS_PASSWORD=graf-pw"),
	}
}

// ok runs a command as env's user and returns its stdout.
func (r *rig) ok(env []string, args ...string) string {
	r.t.Helper()
	res := cli(r.t, env, args...)
	if res.code != 0 {
		r.t.Fatalf("syncledger %s: exit %d\n%s", strings.Join(args, " "), res.code, res.stderr)
	}
	return res.stdout
}

// attacker is a raw nats.go connection of a user, recording the server's
// permission violations.
type attacker struct {
	t    *testing.T
	who  string
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []string
	more chan struct{}
}

var rigLogins = map[string][2]string{"admin": {"ops", "ops-pw"}, "host": {"web", "web-pw"}, "tooling": {"grafana", "graf-pw"}}

func (r *rig) attacker(role string) *attacker {
	r.t.Helper()
	a := &attacker{t: r.t, who: role, more: make(chan struct{})}
	login := rigLogins[role]
	nc, err := nats.Connect(r.url, nats.UserInfo(login[0], login[1]), nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.errs = append(a.errs, err.Error())
			close(a.more)
			a.more = make(chan struct{})
		}))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	a.nc = nc
	if a.js, err = jetstream.New(nc); err != nil {
		r.t.Fatal(err)
	}
	return a
}

// violations returns how many permission violations the server reported.
func (a *attacker) violations() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, e := range a.errs {
		if strings.Contains(e, "Permissions Violation") {
			n++
		}
	}
	return n
}

// waitViolations waits until the server has reported n violations.
func (a *attacker) waitViolations(n int, d time.Duration) bool {
	deadline := time.After(d)
	for {
		a.mu.Lock()
		more := a.more
		a.mu.Unlock()
		if a.violations() >= n {
			return true
		}
		select {
		case <-more:
		case <-deadline:
			return false
		}
	}
}

// request sends a JetStream API request (or any message with a reply) and
// returns "" if the server refused it for this user's permissions, else the
// server's answer.
func (a *attacker) request(subject string, body []byte) string {
	a.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = body
	got, ok := a.exchange(m, 5*time.Second)
	if !ok {
		a.t.Fatalf("%s: no answer and no refusal of %s", a.who, subject)
	}
	return got
}

// exchange publishes m with a reply subject of its own and waits up to d
// for the server's answer (returned; a status without data as
// "(answered: STATUS DESCRIPTION)") or its refusal for this user's
// permissions (""); ok is false if neither came.
func (a *attacker) exchange(m *nats.Msg, d time.Duration) (answer string, ok bool) {
	a.t.Helper()
	before := a.violations()
	ch := make(chan *nats.Msg, 1)
	sub, err := a.nc.ChanSubscribe(nats.NewInbox(), ch)
	if err != nil {
		a.t.Fatal(err)
	}
	defer sub.Unsubscribe()
	m.Reply = sub.Subject
	if err := a.nc.PublishMsg(m); err != nil {
		a.t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		a.t.Fatal(err)
	}
	deadline := time.After(d)
	for {
		a.mu.Lock()
		more := a.more
		a.mu.Unlock()
		if a.violations() > before {
			return "", true
		}
		select {
		case r := <-ch:
			if len(r.Data) == 0 {
				return "(answered: " + r.Header.Get("Status") + " " + r.Header.Get("Description") + ")", true
			}
			return string(r.Data), true
		case <-more:
		case <-deadline:
			return "", false
		}
	}
}

// refused checks that the server refuses each request for this user's
// permissions.
func (a *attacker) refused(what string, subject string, body []byte) {
	a.t.Helper()
	if got := a.request(subject, body); got != "" {
		a.t.Errorf("%s: %s (%s) was not refused: the server answered %s", a.who, what, subject, got)
	}
}

// streamConfigs returns the configuration of each stream of the ledger, as
// the admin reads it.
func streamConfigs(t *testing.T, admin *attacker) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, st := range ledgerStreams() {
		s, err := admin.js.Stream(t.Context(), st)
		if err != nil {
			t.Fatalf("stream %s: %v", st, err)
		}
		b, _ := json.Marshal(s.CachedInfo().Config)
		out[st] = string(b)
	}
	return out
}

func ledgerStreams() []string {
	return []string{ledger.StreamName(rigLedger), natsjs.KVStream(natsjs.HeartbeatBucket(rigLedger)),
		natsjs.KVStream(natsjs.SwampBucket(rigLedger)), natsjs.DeadLetterStream(rigLedger), natsblob.StreamName(rigBucket)}
}

// hostileStreamConfigs are stream configurations a create or an update could
// carry for stream st: every setting that would let its maker decide what
// others' writes become (expire, capture, drop, roll up, republish).
func hostileStreamConfigs(st string) map[string]map[string]any {
	subjects := map[string][]string{
		ledger.StreamName(rigLedger):                           {ledger.SubjectPrefix(rigLedger) + ">"},
		natsjs.KVStream(natsjs.HeartbeatBucket(rigLedger)):     {"$KV." + natsjs.HeartbeatBucket(rigLedger) + ".>"},
		natsjs.KVStream(natsjs.SwampBucket(rigLedger)):         {"$KV." + natsjs.SwampBucket(rigLedger) + ".>"},
		natsjs.DeadLetterStream(rigLedger):                     {natsjs.DeadLetterSubject(rigLedger, ">")},
		natsblob.StreamName(rigBucket):                         {natsblob.ChunkSubjects(rigBucket), natsblob.MetaSubjects(rigBucket)},
		natsjs.KVStream(natsjs.SwampBucket(rigLedger + "_ns")): {"$KV." + natsjs.SwampBucket(rigLedger+"_ns") + ".>"},
	}[st]
	base := func(extra map[string]any) map[string]any {
		c := map[string]any{"name": st, "subjects": subjects, "retention": "limits", "storage": "file", "num_replicas": 1}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	return map[string]map[string]any{
		"keys expire after 2 s":        base(map[string]any{"max_age": int64(2 * time.Second)}),
		"a history kept":               base(map[string]any{"max_msgs_per_subject": 64}),
		"one value in all":             base(map[string]any{"max_msgs": 1}),
		"a byte limit":                 base(map[string]any{"max_bytes": 1024, "discard": "new"}),
		"a message size limit":         base(map[string]any{"max_msg_size": 1}),
		"one consumer":                 base(map[string]any{"max_consumers": 1}),
		"roll-ups allowed":             base(map[string]any{"allow_rollup_hdrs": true}),
		"message deletes allowed":      base(map[string]any{"deny_delete": false}),
		"message TTLs":                 base(map[string]any{"allow_msg_ttl": true}),
		"counters":                     base(map[string]any{"allow_msg_counter": true}),
		"schedules":                    base(map[string]any{"allow_msg_schedules": true, "allow_msg_ttl": true}),
		"batches":                      base(map[string]any{"allow_atomic": true, "allow_batched": true}),
		"in memory":                    base(map[string]any{"storage": "memory"}),
		"work queue":                   base(map[string]any{"retention": "workqueue"}),
		"interest only":                base(map[string]any{"retention": "interest"}),
		"asynchronous persistence":     base(map[string]any{"persist_mode": "async"}),
		"sealed":                       base(map[string]any{"sealed": true}),
		"others' subjects captured":    base(map[string]any{"subjects": append(slices.Clone(subjects), "$KV.SYNCLEDGER_SWAMP_other.>", "syncledger.other.p.>")}),
		"republished elsewhere":        base(map[string]any{"republish": map[string]any{"src": ">", "dest": "leak.>"}}),
		"sourced from elsewhere":       base(map[string]any{"sources": []map[string]any{{"name": "OTHER"}}}),
		"a subject transform":          base(map[string]any{"subject_transform": map[string]any{"src": ">", "dest": "x.>"}}),
		"no direct gets":               base(map[string]any{"allow_direct": false}),
		"a mirror":                     {"name": st, "mirror": map[string]any{"name": "OTHER"}},
		"the smallest that is allowed": {"name": st, "subjects": subjects},
	}
}

// TestBucketMadeFirstRefusedCLI is issue 38's item 1 as a class: no stream of
// the ledger — the swamp bucket above all, and a bucket of a ledger not yet
// made — can be created or changed by a host or tooling credential with any
// configuration a create could carry; afterwards every stream's settings are
// as they were, and a lock a host takes holds past the 2 s the attacker's
// bucket would have kept it.
func TestBucketMadeFirstRefusedCLI(t *testing.T) {
	t.Parallel()
	breachBucketMadeFirst(t, newRig(t))
}

func breachBucketMadeFirst(t *testing.T, r *rig) {
	admin := r.attacker("admin")
	before := streamConfigs(t, admin)
	for _, role := range []string{"host", "tooling"} {
		a := r.attacker(role)
		for _, st := range append(ledgerStreams(), natsjs.KVStream(natsjs.SwampBucket(rigLedger+"_ns"))) {
			for what, cfg := range hostileStreamConfigs(st) {
				body, err := json.Marshal(cfg)
				if err != nil {
					t.Fatal(err)
				}
				a.refused("create "+st+" with "+what, "$JS.API.STREAM.CREATE."+st, body)
				a.refused("update "+st+" to "+what, "$JS.API.STREAM.UPDATE."+st, body)
			}
		}
		a.refused("restore a bucket", "$JS.API.STREAM.RESTORE."+natsjs.KVStream(natsjs.SwampBucket(rigLedger+"_ns")), []byte(`{"config":{"name":"x"}}`))
	}
	if after := streamConfigs(t, admin); !maps.Equal(before, after) {
		t.Errorf("a stream's settings changed:\nbefore %v\nafter  %v", before, after)
	}
	// The swamp bucket keeps what a host writes (a lock's key) past 2 s.
	host := r.attacker("host")
	kv, err := host.js.KeyValue(t.Context(), natsjs.SwampBucket(rigLedger))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "lock.model", []byte("web-1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if e, err := kv.Get(t.Context(), "lock.model"); err != nil || string(e.Value()) != "web-1" {
		t.Errorf("a lock after 2.5 s: %v, %v", e, err)
	}
}

// TestDeadLetterStreamCaptureRefusedCLI is issue 38's item 2: the tooling
// credential cannot make or change the dead-letter stream (nor any other)
// with other subjects — the swamp bucket's, another ledger's — and after its
// attempts a host's swamp lock request and a namespace ledger's creation by
// the admin work, and the tooling user still stores its consumer's dead
// letters.
func TestDeadLetterStreamCaptureRefusedCLI(t *testing.T) {
	t.Parallel()
	breachDeadLetterCapture(t, newRig(t))
}

func breachDeadLetterCapture(t *testing.T, r *rig) {
	tool := r.attacker("tooling")
	for _, st := range []string{natsjs.DeadLetterStream(rigLedger), natsjs.DeadLetterStream(rigLedger + "_ns"), "CAPTURE"} {
		for _, subjects := range [][]string{
			{natsjs.DeadLetterSubject(rigLedger, ">"), "$KV." + natsjs.SwampBucket(rigLedger) + ".>"},
			{"$KV.>"},
			{ledger.SubjectPrefix(rigLedger+"_ns") + ">"},
			{"syncledger.>"},
			{">"},
		} {
			body, _ := json.Marshal(map[string]any{"name": st, "subjects": subjects})
			tool.refused("create "+st+" over "+strings.Join(subjects, " "), "$JS.API.STREAM.CREATE."+st, body)
			tool.refused("update "+st+" over "+strings.Join(subjects, " "), "$JS.API.STREAM.UPDATE."+st, body)
		}
	}
	// A swamp lock still takes: its subjects belong to the swamp bucket alone.
	host := r.attacker("host")
	kv, err := host.js.KeyValue(t.Context(), natsjs.SwampBucket(rigLedger))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(t.Context(), "lock.vpc", []byte("web-1")); err != nil {
		t.Errorf("a swamp lock after the attempts: %v", err)
	}
	// The admin makes a namespace's ledger: its subjects are free.
	admin := r.attacker("admin")
	if _, err := natsjs.CreateLog(t.Context(), admin.nc, natsjs.LedgerConfig{Name: rigLedger + "_ns"}); err != nil {
		t.Errorf("the admin makes ledger %s_ns after the attempts: %v", rigLedger, err)
	}
	// The tooling user stores its own consumer's dead letters, and no other's.
	if ack := tool.request(natsjs.DeadLetterSubject(rigLedger, "audit"), []byte(`{}`)); ack == "" || strings.Contains(ack, "error") {
		t.Errorf("the tooling user's dead letter of audit: %q", ack)
	}
	tool.refused("a dead letter of another consumer", natsjs.DeadLetterSubject(rigLedger, "webhook"), []byte(`{}`))
}

// consumerCreates are the requests that create (or, on an existing durable,
// update) a consumer named name on stream st with cfg, in every form the API
// takes.
func consumerCreates(st, name string, cfg map[string]any) map[string][]byte {
	body := func(c map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"stream_name": st, "config": c, "action": ""})
		return b
	}
	with := func(extra map[string]any) map[string]any {
		c := map[string]any{}
		for k, v := range cfg {
			c[k] = v
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	return map[string][]byte{
		"$JS.API.CONSUMER.CREATE." + st + "." + name:                             body(with(map[string]any{"durable_name": name})),
		"$JS.API.CONSUMER.CREATE." + st + "." + name + ".syncledger.nothing.p.x": body(with(map[string]any{"name": name, "filter_subject": "syncledger.nothing.p.x"})),
		"$JS.API.CONSUMER.DURABLE.CREATE." + st + "." + name:                     body(with(map[string]any{"durable_name": name})),
		"$JS.API.CONSUMER.CREATE." + st:                                          body(with(map[string]any{"name": name})),
	}
}

// TestDurableRefilterRefusedCLI is issue 38's item 3: the audit consumer
// runs (made by the admin, run by the tooling user); the host and the
// tooling credentials send every form of consumer create for it with a
// filter matching nothing, an inactive threshold, headers only, a max
// deliver of one; all are refused, the durable's configuration is as the
// admin made it, and the commits the host makes afterwards are in the audit
// file.
func TestDurableRefilterRefusedCLI(t *testing.T) {
	t.Parallel()
	breachDurableRefilter(t, newRig(t))
}

func breachDurableRefilter(t *testing.T, r *rig) {
	r.ok(r.admin, "consume", "create", "audit")
	file := filepath.Join(r.dir, "audit.jsonl")
	cons := startProc(t, r.tool, "consume", "audit", "--file", file)
	cache := filepath.Join(r.dir, "web-1")
	commit := func(msg string) {
		put(t, cache, "audit/"+msg, msg)
		r.ok(r.host, "--cache", cache, "commit", "-m", msg)
	}
	waitAudit := func(msg string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if b, _ := os.ReadFile(file); strings.Contains(string(b), `"message":"`+msg+`"`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the audit file lacks %q; consumer stderr:\n%s", msg, cons.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	commit("before")
	waitAudit("before")
	admin := r.attacker("admin")
	info := func() string {
		c, err := admin.js.Consumer(t.Context(), ledger.StreamName(rigLedger), "audit")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(c.CachedInfo().Config)
		return string(b)
	}
	before := info()
	for _, role := range []string{"host", "tooling"} {
		a := r.attacker(role)
		for what, cfg := range map[string]map[string]any{
			"a filter matching nothing": {"ack_policy": "all", "filter_subject": "syncledger.nothing.p.x"},
			"dropped when idle":         {"ack_policy": "all", "inactive_threshold": int64(time.Second)},
			"headers only":              {"ack_policy": "all", "headers_only": true},
			"one delivery":              {"ack_policy": "all", "max_deliver": 1},
			"a push consumer":           {"ack_policy": "all", "deliver_subject": "leak"},
		} {
			for subj, body := range consumerCreates(ledger.StreamName(rigLedger), "audit", cfg) {
				a.refused("re-filter the audit consumer: "+what, subj, body)
			}
		}
		a.refused("pause the audit consumer", "$JS.API.CONSUMER.PAUSE."+ledger.StreamName(rigLedger)+".audit", []byte(`{"pause_until":"2100-01-01T00:00:00Z"}`))
	}
	if after := info(); after != before {
		t.Errorf("the audit consumer changed:\nbefore %s\nafter  %s", before, after)
	}
	commit("after")
	waitAudit("after")
	if code := cons.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("consume audit exit %d; stderr %s", code, cons.stderr)
	}
}

// TestThousandDurablesRefusedCLI is issue 38's item 4: the host and tooling
// credentials send a thousand consumer creates each, durable and ephemeral,
// on every stream of the ledger; every one is refused, no stream holds a
// consumer more than before, and every reader still reads (log, consume).
func TestThousandDurablesRefusedCLI(t *testing.T) {
	t.Parallel()
	breachThousandDurables(t, newRig(t))
}

func breachThousandDurables(t *testing.T, r *rig) {
	r.ok(r.admin, "consume", "create", "audit")
	admin := r.attacker("admin")
	counts := func() map[string]int {
		out := map[string]int{}
		for _, st := range ledgerStreams() {
			s, err := admin.js.Stream(t.Context(), st)
			if err != nil {
				t.Fatal(err)
			}
			out[st] = s.CachedInfo().State.Consumers
		}
		return out
	}
	before := counts()
	for _, role := range []string{"host", "tooling"} {
		a := r.attacker(role)
		sent := 0
		for i := range 1000 {
			st := ledgerStreams()[i%len(ledgerStreams())]
			for subj, body := range consumerCreates(st, fmt.Sprintf("idle%d", i), map[string]any{"ack_policy": "explicit"}) {
				if err := a.nc.PublishRequest(subj, a.nc.NewRespInbox(), body); err != nil {
					t.Fatal(err)
				}
				sent++
			}
		}
		if err := a.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if !a.waitViolations(sent, 30*time.Second) {
			t.Errorf("%s: %d of %d consumer creates refused", role, a.violations(), sent)
		}
	}
	if after := counts(); !maps.Equal(before, after) {
		t.Errorf("consumers per stream: before %v, after %v", before, after)
	}
	cache := filepath.Join(r.dir, "web-1")
	put(t, cache, "audit/x", "x")
	r.ok(r.host, "--cache", cache, "commit", "-m", "still")
	if out := r.ok(r.tool, "log"); !strings.Contains(out, "still") {
		t.Errorf("the tooling user's log after the flood:\n%s", out)
	}
	file := filepath.Join(r.dir, "audit.jsonl")
	cons := startProc(t, r.tool, "consume", "audit", "--file", file)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(file); strings.Contains(string(b), `"message":"still"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit consumer after the flood wrote nothing; stderr:\n%s", cons.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cons.stop(t, syscall.SIGINT)
}

// TestRollupRefusedCLI is issue 38's item 5 as a class: every roll-up value
// (and a message TTL, a counter, a schedule, a batch) a host or tooling
// credential can put on a publish it may make — to the swamp bucket, the
// heartbeat bucket, the ledger, the object store, the dead letters — is
// refused by the stream, and every key, commit and blob stored before reads
// back as it was.
func TestRollupRefusedCLI(t *testing.T) {
	t.Parallel()
	breachRollup(t, newRig(t))
}

func breachRollup(t *testing.T, r *rig) {
	cache := filepath.Join(r.dir, "web-1")
	put(t, cache, "audit/a", "a")
	r.ok(r.host, "--cache", cache, "commit", "-m", "one")
	r.ok(r.host, "--cache", cache, "sync")
	r.ok(r.admin, "consume", "create", "audit")
	host, tool, admin := r.attacker("host"), r.attacker("tooling"), r.attacker("admin")
	ctx := t.Context()
	swamp, err := host.js.KeyValue(ctx, natsjs.SwampBucket(rigLedger))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"control.vault", "control.token", "lock.a", "ns.eu"} {
		if _, err := swamp.Put(ctx, k, []byte("value of "+k)); err != nil {
			t.Fatal(err)
		}
	}
	// Everything stored, as the admin reads it.
	stored := func() map[string]string {
		out := map[string]string{}
		for _, st := range ledgerStreams() {
			s, err := admin.js.Stream(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			last := s.CachedInfo().State.LastSeq
			for seq := uint64(1); seq <= last; seq++ {
				m, err := s.GetMsg(ctx, seq)
				if err == nil {
					out[fmt.Sprintf("%s/%d", st, seq)] = m.Subject + " " + string(m.Data)
				}
			}
		}
		return out
	}
	before := stored()
	headers := []nats.Header{}
	for _, v := range []string{"all", "sub", "ALL", "Sub", "other"} { // "" is no roll-up
		headers = append(headers, nats.Header{"Nats-Rollup": []string{v}})
	}
	headers = append(headers,
		nats.Header{"Nats-TTL": []string{"1s"}}, nats.Header{"Nats-TTL": []string{"never"}},
		nats.Header{"Nats-Incr": []string{"1"}},
		nats.Header{"Nats-Schedule": []string{"@every 1s"}, "Nats-Schedule-Target": []string{"$KV." + natsjs.SwampBucket(rigLedger) + ".x"}},
		nats.Header{"Nats-Batch-Id": []string{"b1"}, "Nats-Batch-Sequence": []string{"1"}, "Nats-Batch-Commit": []string{"1"}},
	)
	targets := []struct {
		a       *attacker
		subject string
	}{
		{host, "$KV." + natsjs.SwampBucket(rigLedger) + ".lock.a"},
		{host, "$KV." + natsjs.SwampBucket(rigLedger) + ".new"},
		{host, "$KV." + natsjs.HeartbeatBucket(rigLedger) + ".web-1"},
		{host, "$O." + rigBucket + ".C.chunk"},
		{host, "$O." + rigBucket + ".M.bWV0YQ=="},
		{tool, natsjs.DeadLetterSubject(rigLedger, "audit")},
	}
	for _, tg := range targets {
		for _, h := range headers {
			m := nats.NewMsg(tg.subject)
			m.Header = h
			m.Data = []byte("attack")
			_, err := tg.a.js.PublishMsg(ctx, m)
			if err == nil {
				t.Errorf("%s: a publish to %s with %v was stored", tg.a.who, tg.subject, h)
			}
		}
	}
	// The ledger's own subjects take batches (a commit is one), not roll-ups
	// nor TTLs, counters or schedules.
	for _, h := range headers[:len(headers)-1] {
		m := nats.NewMsg(ledger.Subject(rigLedger, "audit"))
		m.Header = h
		m.Data = []byte("attack")
		if _, err := host.js.PublishMsg(ctx, m); err == nil {
			t.Errorf("host: a publish to the ledger with %v was stored", h)
		}
	}
	after := stored()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %q before, %q after", k, v, after[k])
		}
	}
	for _, k := range []string{"control.vault", "control.token", "lock.a", "ns.eu"} {
		if e, err := swamp.Get(ctx, k); err != nil || string(e.Value()) != "value of "+k {
			t.Errorf("swamp key %s after the attempts: %v %v", k, e, err)
		}
	}
	r.ok(r.host, "--cache", cache, "sync")
}

// TestRevokeOneHostCLI: serve with a user per host; host B's user removed
// from the users file and serve sent SIGHUP, B is refused (its commands fail
// naming the credentials) while A and C, and the server's running process,
// go on: they commit and sync each other's commits as before.
func TestRevokeOneHostCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users.yaml")
	hosts := []string{"web-a", "web-b", "web-c"}
	writeUsers := func(hs ...string) {
		b := "users:\n  - {user: ops, password: ops-pw, role: admin}\n"
		for _, h := range hs {
			b += fmt.Sprintf("  - {user: %s, password: %s-pw, role: host}\n", h, h)
		}
		writeFile(t, usersFile, b)
	}
	writeUsers(hosts...)
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+usersFile), "--listen", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data"), "--blobs", "nats://"+rigBucket)
	defer srv.stop(t, syscall.SIGTERM)
	env := func(h string) []string {
		return cliEnv("SYNCLEDGER_NATS="+info.URL, "NATS_USER="+h, "NATS_PASSWORD="+h+"-pw", "SYNCLEDGER_HOST="+h, "SYNCLEDGER_LOG_LEVEL=warn")
	}
	run := func(h string, args ...string) result {
		return cli(t, env(h), append([]string{"--cache", filepath.Join(dir, h)}, args...)...)
	}
	for _, h := range hosts {
		put(t, filepath.Join(dir, h), "data/t/"+h+"/m/1/raw", h)
		if r := run(h, "commit", "-m", h); r.code != 0 {
			t.Fatalf("%s commit: %+v", h, r)
		}
	}

	writeUsers("web-a", "web-c")
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := run("web-b", "sync")
		if r.code != 0 {
			if !strings.Contains(r.stderr, "check the credentials") {
				t.Errorf("B after its revocation: %+v, want a refusal naming the credentials", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("host B still syncs 20 s after its user was removed and serve was sent SIGHUP")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, h := range []string{"web-a", "web-c"} {
		put(t, filepath.Join(dir, h), "data/t/"+h+"/m/2/raw", h+" again")
		if r := run(h, "commit", "-m", h+" again"); r.code != 0 {
			t.Errorf("%s commit after B's revocation: %+v", h, r)
		}
	}
	for _, h := range []string{"web-a", "web-c"} {
		if r := run(h, "sync"); r.code != 0 {
			t.Errorf("%s sync after B's revocation: %+v", h, r)
		}
		got := tree(t, filepath.Join(dir, h))
		for _, o := range []string{"web-a", "web-c"} {
			if got["data/t/"+o+"/m/2/raw"] != o+" again" {
				t.Errorf("%s lacks %s's commit after B's revocation: %v", h, o, got)
			}
		}
		if got["data/t/web-b/m/1/raw"] != "web-b" {
			t.Errorf("%s lacks B's commit made before the revocation", h)
		}
	}
	if r := run("web-b", "commit", "-m", "revoked"); r.code == 0 {
		t.Error("B commits after its revocation")
	}
}

package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/directget"
	"github.com/syncledger/syncledger/natsauth"
)

// sweepEnv turns on the sweep's long form: every body of every request to
// every filling of every subject, every header on every subject, floods of a
// thousand. .ci/run sets it; go test ./... runs the short form (one of each).
const sweepEnv = "SYNCLEDGER_TEST_SWEEP"

// sweepRole is a user below the admin the sweep attacks as, with the scope
// serve gives it.
type sweepRole struct {
	name     string // subtest name
	user, pw string
	role     natsauth.Role
	scope    natsauth.Scope
}

var sweepScope = natsauth.Scope{Ledger: rigLedger, ObjectBucket: rigBucket}

func scoped(f func(*natsauth.Scope)) natsauth.Scope {
	s := sweepScope
	f(&s)
	return s
}

// sweepRoles are the roles below the admin, as serve's users have them: a
// host scoped to its own host id (the recommended setup, docs/ops.md), the
// tooling role without consumers, and a tooling user scoped to the durable
// consumer hook.
var sweepRoles = []sweepRole{
	{"host", "web-1", "web-1-pw", natsauth.RoleHost, scoped(func(s *natsauth.Scope) { s.Hosts = []string{"web-1"} })},
	{"tooling", "tool", "tool-pw", natsauth.RoleTooling, sweepScope},
	{"tooling-hook", "hooker", "hook-pw", natsauth.RoleTooling, scoped(func(s *natsauth.Scope) { s.Consumers = []string{"hook"} })},
}

const sweepUsers = `users:
  - {user: ops, password: ops-pw, role: admin}
  - {user: web-1, password: web-1-pw, role: host, hosts: [web-1]}
  - {user: web-2, password: web-2-pw, role: host, hosts: [web-2]}
  - {user: web-3, password: web-3-pw, role: host, hosts: [web-3]}
  - {user: web-any, password: web-any-pw, role: host}
  - {user: grafana, password: graf-pw, role: tooling, consumers: [audit]}
  - {user: tool, password: tool-pw, role: tooling}
  - {user: hooker, password: hook-pw, role: tooling, consumers: [hook]}
`

// sweepTestName is the subtest of TestHostileSweep that tries grant g of a
// role (docs/ops.md's generated table names it).
func sweepTestName(role string, g natsauth.Grant) string {
	rule := "allow"
	if g.Deny {
		rule = "deny"
	}
	return "TestHostileSweep/" + role + "/" + string(g.Verb) + "_" + rule + "_" + g.Subject
}

// The subtests of each role beside its grants: what no grant allows, every
// subscription no grant allows, and the floods.
const (
	sweepRest      = "everything_else"
	sweepRestSub   = "subscribe_everything_else"
	sweepFlood     = "floods"
	sweepHeartbeat = "TestHostileSweep/unscoped_host_heartbeats"
)

// sw is the sweep's world: serve with a user of each role, the ledger's
// honest fixtures, and the readers that run throughout.
type sw struct {
	t     *testing.T
	long  bool
	dir   string
	url   string
	env   map[string][]string // CLI environment per user
	admin *attacker
	log   *natsjs.Log // the admin's
	uuid  string
	n     int // fresh names
	// before: the state every row must leave as it was.
	configs   map[string]string
	consumers map[string]string
	messages  map[string]string // stream/seq → subject and data
	// the readers that run throughout, their output drained
	watch, follow, audit, tail   *proc
	watchOut, followOut, tailOut *drained
	uiURL                        string // the tooling user's dashboard
	auditFile                    string
	caches                       []string
	// quarantined are the commits of seqs the sweep's admin quarantined:
	// the audit file may hold them (recorded before), the ledger skips them.
	quarantined map[string]bool
}

// drained collects a process's stdout lines as they come (a reader that
// prints a line per commit must never block on a full pipe).
type drained struct {
	mu    sync.Mutex
	lines []string
	next  int // lines before it were matched by a wait
}

func drain(p *proc) *drained {
	d := &drained{}
	go func() {
		for l := range p.lines {
			d.mu.Lock()
			d.lines = append(d.lines, l)
			d.mu.Unlock()
		}
	}()
	return d
}

// wait waits for a line, after the last one matched, that holds substr.
func (d *drained) wait(t *testing.T, p *proc, substr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d.mu.Lock()
		for i := d.next; i < len(d.lines); i++ {
			if strings.Contains(d.lines[i], substr) {
				d.next = i + 1
				d.mu.Unlock()
				return
			}
		}
		d.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no line holding %q in 30 s; stderr:\n%s", substr, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostileSweep is issue 38's hostile-client sweep: for each role below
// the admin (host scoped to its host id, tooling, tooling scoped to a
// consumer), generated from natsauth's grants — each grant a subtest named
// as docs/ops.md's generated threat table names it — on serve with a user
// of each role: every JetStream API request nats-server declares (read from
// its source), filled with the ledger's resources, that the grant names,
// with hostile bodies (every configuration a create or update could carry,
// purges, resets, fetches, gets); every header a publish can carry on every
// subject the role may publish to (roll-ups, expectations, TTLs, message
// ids that another writer will use, batches, counters, schedules, markers,
// forged server headers, hidden and padded header blocks, trace
// destinations); everything no grant allows, and every subscription; and
// floods. After each row, no stream's or consumer's configuration changed
// and every message stored before is there as it was; after each role,
// every honest host converges and every reader reads; at the end, locks
// are exclusive, the audit file is complete, and a fresh and a rebuilt
// host hold what the others hold. SYNCLEDGER_TEST_SWEEP=1 is the long form.
func TestHostileSweep(t *testing.T) {
	t.Parallel()
	s := newSweep(t, os.Getenv(sweepEnv) != "")
	start := time.Now()
	for _, r := range sweepRoles {
		t.Run(r.name, func(t *testing.T) {
			s.t = t
			a := s.connect(t, r.user, r.pw)
			perms, err := natsauth.For(r.role, r.scope)
			if err != nil {
				t.Fatal(err)
			}
			grants, err := natsauth.Grants(r.role, r.scope)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range grants {
				name := strings.TrimPrefix(sweepTestName(r.name, g), "TestHostileSweep/"+r.name+"/")
				t.Run(name, func(t *testing.T) {
					s.t, a.t = t, t
					s.row(t, a, r, perms, g)
					s.unchanged(t)
				})
			}
			t.Run(sweepRest, func(t *testing.T) {
				s.t, a.t = t, t
				s.rest(t, a, perms)
				s.unchanged(t)
			})
			t.Run(sweepRestSub, func(t *testing.T) {
				s.t, a.t = t, t
				s.restSubscribe(t, a, perms)
			})
			t.Run(sweepFlood, func(t *testing.T) {
				s.t, a.t = t, t
				s.flood(t, a, r, perms)
				s.unchanged(t)
			})
			s.t, a.t = t, t
			s.readersRead(t, r.name)
		})
	}
	t.Run(strings.TrimPrefix(sweepHeartbeat, "TestHostileSweep/"), func(t *testing.T) {
		s.t = t
		s.unscopedHeartbeats(t)
	})
	s.t = t
	s.final(t)
	form := "short"
	if s.long {
		form = "long"
	}
	t.Logf("hostile sweep (%s form): %d roles, in %v", form, len(sweepRoles), time.Since(start).Round(time.Second))
}

func newSweep(t *testing.T, long bool) *sw {
	t.Helper()
	dir := t.TempDir()
	users := writeFile(t, filepath.Join(dir, "users.yaml"), sweepUsers)
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users), "--listen", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data"), "--blobs", "nats://"+rigBucket)
	t.Cleanup(func() { srv.stop(t, syscall.SIGTERM) })
	s := &sw{t: t, long: long, dir: dir, url: info.URL, env: map[string][]string{}}
	for _, u := range [][3]string{{"ops", "ops-pw", ""}, {"web-1", "web-1-pw", "web-1"}, {"web-2", "web-2-pw", "web-2"},
		{"web-3", "web-3-pw", "web-3"}, {"grafana", "graf-pw", ""}, {"hooker", "hook-pw", ""}} {
		env := cliEnv("SYNCLEDGER_NATS="+info.URL, "SYNCLEDGER_LOG_LEVEL=warn", "NATS_USER="+u[0], "NATS_PASSWORD="+u[1])
		if u[2] != "" {
			env = append(env, "SYNCLEDGER_HOST="+u[2])
		}
		s.env[u[0]] = env
	}
	s.admin = s.connect(t, "ops", "ops-pw")
	l, err := natsjs.OpenLog(t.Context(), s.admin.nc, rigLedger)
	if err != nil {
		t.Fatal(err)
	}
	s.log, s.uuid = l, l.UUID()
	s.honest()
	s.configs, s.consumers, s.messages = s.state(t)
	return s
}

// connect is a raw nats.go connection of a user, recording the server's
// permission violations.
func (s *sw) connect(t *testing.T, user, pw string) *attacker {
	t.Helper()
	a := &attacker{t: t, who: user, more: make(chan struct{})}
	nc, err := nats.Connect(s.url, nats.UserInfo(user, pw), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.errs = append(a.errs, err.Error())
			close(a.more)
			a.more = make(chan struct{})
		}))
	if err != nil {
		t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	a.nc = nc
	if a.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return a
}

func (s *sw) ok(user string, args ...string) string {
	s.t.Helper()
	r := cli(s.t, s.env[user], args...)
	if r.code != 0 {
		s.t.Fatalf("%s: syncledger %s: exit %d\n%s%s", user, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func (s *sw) cache(host string) string { return filepath.Join(s.dir, "caches", host) }

func (s *sw) commit(host, rel, content, msg string) {
	s.t.Helper()
	put(s.t, s.cache(host), rel, content)
	s.ok(host, "--cache", s.cache(host), "commit", "-m", msg)
}

// honest makes what the attacks must leave as it is: commits of two hosts
// (one spanning three partitions: a batch), their blobs, heartbeats, swamp
// keys (a held lock, the control plane, the namespace registry), the
// durable consumers audit and hook, a dead letter of hook; and starts the
// readers that run throughout: a host's watch, the tooling user's log
// --follow, tail, dashboard and audit consumer.
func (s *sw) honest() {
	t := s.t
	s.caches = []string{s.cache("web-1"), s.cache("web-2")}
	s.commit("web-1", "audit/one", "one", "honest one")
	for _, p := range []string{"data/t/m/1/raw", "data/t/m/2/raw", "definitions/x.yaml"} {
		put(t, s.cache("web-2"), p, "two "+p)
	}
	s.ok("web-2", "--cache", s.cache("web-2"), "commit", "-m", "honest batch")
	s.ok("web-1", "--cache", s.cache("web-1"), "sync")
	s.ok("web-2", "--cache", s.cache("web-2"), "sync")
	s.ok("ops", "consume", "create", "audit")
	s.ok("ops", "consume", "create", "hook")
	host := s.connect(t, "web-2", "web-2-pw")
	kv, err := host.js.KeyValue(t.Context(), natsjs.SwampBucket(rigLedger))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"control.vault", "control.token", "lock.model", "ns.eu"} {
		if _, err := kv.Put(t.Context(), k, []byte("honest "+k)); err != nil {
			t.Fatal(err)
		}
	}
	hook := s.connect(t, "hooker", "hook-pw")
	if _, err := hook.js.Publish(t.Context(), natsjs.DeadLetterSubject(rigLedger, "hook"), []byte(`{"honest":1}`)); err != nil {
		t.Fatal(err)
	}
	s.auditFile = filepath.Join(s.dir, "audit.jsonl")
	s.audit = startProc(t, s.env["grafana"], "consume", "audit", "--file", s.auditFile)
	drain(s.audit)
	s.follow = startProc(t, s.env["grafana"], "log", "--follow")
	s.followOut = drain(s.follow)
	s.followOut.wait(t, s.follow, "honest batch")
	s.tail = startProc(t, s.env["grafana"], "tail", "--from", "1")
	s.tailOut = drain(s.tail)
	s.tailOut.wait(t, s.tail, "honest batch")
	ui := startProc(t, s.env["grafana"], "ui", "--listen", "127.0.0.1:0", "--json", "--poll", "100ms")
	var out struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(ui.line(t, `^\{`)), &out); err != nil {
		t.Fatalf("ui --json: %v", err)
	}
	s.uiURL = out.URL
	drain(ui)
	waitCommit(t, s.uiURL, "honest batch")
	s.ok("web-3", "--cache", s.cache("web-3"), "sync")
	s.watch = startProc(t, s.env["web-3"], "--cache", s.cache("web-3"), "watch")
	s.watchOut = drain(s.watch)
	s.waitAudit(t)
}

// state is what the attacks must not change: every stream's configuration,
// the durable consumers' configurations and counts, and every message of the
// ledger's stream, its object store, its dead letters and its swamp bucket
// (the heartbeat bucket keeps one beat a host: an honest beat replaces the
// one before).
func (s *sw) state(t *testing.T) (configs, consumers, messages map[string]string) {
	t.Helper()
	ctx := t.Context()
	configs, consumers, messages = map[string]string{}, map[string]string{}, map[string]string{}
	for _, st := range ledgerStreams() {
		str, err := s.admin.js.Stream(ctx, st)
		if err != nil {
			t.Fatalf("stream %s: %v", st, err)
		}
		info := str.CachedInfo()
		b, _ := json.Marshal(info.Config)
		configs[st] = string(b)
		consumers[st+" consumers"] = strconv.Itoa(info.State.Consumers)
		if st == natsjs.KVStream(natsjs.HeartbeatBucket(rigLedger)) {
			continue
		}
		dg := directget.Stream{Conn: s.admin.nc, Name: st, Leader: !info.Config.AllowDirect}
		if err := dg.Scan(ctx, ">", 1, func(m directget.Msg) error {
			messages[fmt.Sprintf("%s/%d", st, m.Seq)] = m.Subject + " " + string(m.Data)
			return nil
		}); err != nil {
			t.Fatalf("stream %s: %v", st, err)
		}
	}
	if _, err := s.admin.js.Stream(ctx, natsjs.KVStream(natsjs.SwampBucket(rigLedger+"_ns"))); err == nil {
		configs["namespace bucket"] = "made"
	}
	for _, c := range []string{"audit", "hook"} {
		cons, err := s.admin.js.Consumer(ctx, ledger.StreamName(rigLedger), c)
		if err != nil {
			t.Fatalf("consumer %s: %v", c, err)
		}
		b, _ := json.Marshal(cons.CachedInfo().Config)
		consumers[c] = string(b)
	}
	return configs, consumers, messages
}

// unchanged checks that no stream's or consumer's configuration changed, no
// consumer was made or removed, and every message stored before is there as
// it was (new ones may follow).
func (s *sw) unchanged(t *testing.T) {
	t.Helper()
	configs, consumers, messages := s.state(t)
	if d := cmp.Diff(s.configs, configs); d != "" {
		t.Errorf("a stream's configuration changed (-before +after):\n%s", d)
	}
	if d := cmp.Diff(s.consumers, consumers); d != "" {
		t.Errorf("a consumer changed (-before +after):\n%s", d)
	}
	for k, v := range s.messages {
		if messages[k] != v {
			t.Errorf("%s: %q before, %q now", k, v, messages[k])
		}
	}
}

// row tries grant g of role r.
func (s *sw) row(t *testing.T, a *attacker, r sweepRole, perms *natsauth.Permissions, g natsauth.Grant) {
	switch {
	case g.Verb == natsauth.Subscribe:
		s.subscribe(t, a, g.Subject, !g.Deny)
		if !strings.ContainsAny(g.Subject, "*>") {
			return
		}
		// A subject under it, too.
		s.subscribe(t, a, strings.ReplaceAll(strings.ReplaceAll(g.Subject, ">", "x.y"), "*", "x"), !g.Deny)
	case strings.HasPrefix(g.Subject, "$JS"):
		s.api(t, a, perms, g)
	default:
		s.data(t, a, r, perms, g)
	}
}

// api sends every request the server declares that g's subject pattern
// names, filled with the ledger's resources, with every hostile body: a deny
// is refused, an allow answered (and, after, nothing changed: unchanged).
func (s *sw) api(t *testing.T, a *attacker, perms *natsauth.Permissions, g natsauth.Grant) {
	catalog, err := serverSubjects()
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	try := func(subj string) {
		want := permitted(perms, subj)
		if g.Deny && want {
			t.Errorf("%s is allowed, and grant %s denies it", subj, g.Subject)
		}
		for _, body := range apiBodies(subj, !s.long) {
			got := a.request(subj, body)
			sent++
			switch {
			case want && got == "":
				t.Errorf("%s: %s (%s) refused, and the role may", a.who, subj, body)
			case !want && got != "":
				t.Errorf("%s: %s (%s) answered, and the role may not: %s", a.who, subj, body, got)
			}
		}
	}
	for _, p := range catalog {
		for _, subj := range fill(p, !s.long) {
			if natsauth.Match(g.Subject, subj) {
				try(subj)
			}
		}
	}
	// The grant's own subject, filled as the catalog would not (an ack of
	// its own consumer, an API subject with no wildcard).
	if !strings.ContainsAny(g.Subject, "*>") {
		try(g.Subject)
	} else if strings.HasPrefix(g.Subject, "$JS.ACK.") {
		sent += s.acks(t, a, g)
	}
	if sent == 0 {
		t.Errorf("no request the server declares matches %s", g.Subject)
	}
	t.Logf("%d requests under %s", sent, g.Subject)
}

// acks publishes acknowledgements of every kind under ack subjects of the
// grant's consumer (a user's own: allowed, and only that consumer's
// position may move).
func (s *sw) acks(t *testing.T, a *attacker, g natsauth.Grant) int {
	from := a.mark()
	bodies := []string{"+ACK", "-NAK", `-NAK {"delay": 3600000000000}`, "+WPI", "+NXT", `+NXT {"batch": 1000}`, "+TERM", "+TERM reason", ""}
	for _, body := range bodies {
		subj := strings.TrimSuffix(g.Subject, ">") + "1.1.1.1.1700000000000000000.0"
		if err := a.nc.Publish(subj, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	refused := a.refusedSince(from)
	if g.Deny && refused != len(bodies) {
		t.Errorf("%d of %d acknowledgements on %s refused, and it is denied", refused, len(bodies), g.Subject)
	}
	if !g.Deny && refused != 0 {
		t.Errorf("%d of %d acknowledgements on %s refused, and the role may", refused, len(bodies), g.Subject)
	}
	return len(bodies)
}

// subscribe subscribes to subject and reports whether the server refused.
func (s *sw) subscribe(t *testing.T, a *attacker, subject string, want bool) {
	t.Helper()
	from := a.mark()
	sub, err := a.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	refused := a.refusedSince(from) > 0
	if want && refused {
		t.Errorf("%s: subscribing to %s refused, and the role may", a.who, subject)
	}
	if !want && !refused {
		t.Errorf("%s: subscribing to %s allowed, and the role may not", a.who, subject)
	}
}

// rest sends what no grant allows — every request the server declares,
// filled, that the role's permissions do not let through, and publishes to
// other ledgers', other hosts' and other consumers' subjects — and checks
// each is refused.
func (s *sw) rest(t *testing.T, a *attacker, perms *natsauth.Permissions) {
	catalog, err := serverSubjects()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range catalog {
		for _, subj := range fill(p, !s.long) {
			if permitted(perms, subj) {
				continue
			}
			n++
			if got := a.request(subj, apiBodies(subj, true)[0]); got != "" {
				t.Errorf("%s: %s answered, and no grant allows it: %s", a.who, subj, got)
			}
		}
	}
	for _, subj := range []string{
		ledger.SubjectPrefix("other") + "x", ledger.QuarantineSubject(rigLedger), natsjs.StoredPrefix(rigLedger) + "audit",
		natsjs.ServerSubject(rigLedger), "$KV." + natsjs.HeartbeatBucket(rigLedger) + ".web-2", "$KV." + natsjs.HeartbeatBucket(rigLedger) + ".evil",
		"$KV." + natsjs.SwampBucket("other") + ".k", "$O." + rigBucket + ".X.x", "$O.other.C.x",
		natsjs.DeadLetterSubject(rigLedger, "audit"), natsjs.DeadLetterSubject(rigLedger, "x"), "$SYS.REQ.SERVER.PING", "_INBOX.x",
	} {
		if permitted(perms, subj) {
			continue
		}
		n++
		if got := a.request(subj, []byte(`{}`)); got != "" {
			t.Errorf("%s: a publish to %s answered, and no grant allows it: %s", a.who, subj, got)
		}
	}
	t.Logf("%d requests and publishes no grant allows: refused", n)
}

// restSubscribe tries subscriptions no grant allows.
func (s *sw) restSubscribe(t *testing.T, a *attacker, perms *natsauth.Permissions) {
	for _, subj := range []string{
		">", "syncledger.>", "syncledger." + rigLedger + ".>", ledger.SubjectPrefix(rigLedger) + ">", ledger.SubjectPrefix(rigLedger) + "audit",
		ledger.SubjectPrefix(rigLedger) + "*", natsjs.DeadLetterSubject(rigLedger, ">"), "$KV.>", "$KV." + natsjs.SwampBucket(rigLedger) + ".>",
		"$O.>", "$JS.API.>", "$JS.ACK.>", "$JS.EVENT.>", "$SYS.>", "syncledger.other.stored.>",
	} {
		want := perms.Subscribe.Allows(subj)
		s.subscribe(t, a, subj, want)
	}
}

// headerSet is one set of headers a publish carries.
type headerSet struct {
	name string
	h    nats.Header
	// destructive: were it stored, what others stored could go (a roll-up,
	// a TTL …): every stream must refuse it, on any subject.
	destructive bool
	raw         string // a raw header block (HPUB) in place of h
	// via is a subject the publish also sends to (a trace's destination):
	// the server refuses the publish when the role may not publish there.
	via string
}

// headerSets are every header a publish can carry (short: one of each
// kind). subject is the one published to, stream its stream.
func (s *sw) headerSets(subject, stream string) []headerSet {
	hs := func(kv ...string) nats.Header {
		h := nats.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	s.n++
	id := fmt.Sprintf("sweep-%d", s.n)
	var sets []headerSet
	add := func(name string, destructive bool, h nats.Header) {
		sets = append(sets, headerSet{name: name, h: h, destructive: destructive})
	}
	for i, v := range []string{"all", "sub", "ALL", "Sub", "other", ""} {
		if i == 0 || s.long {
			add("Nats-Rollup: "+v, v != "", hs("Nats-Rollup", v))
		}
	}
	for i, v := range []string{"1s", "never", "0", "-1"} {
		if i == 0 || s.long {
			add("Nats-TTL: "+v, v != "0", hs("Nats-TTL", v))
		}
	}
	add("Nats-Incr", true, hs("Nats-Incr", "1"))
	add("Nats-Schedule", true, hs("Nats-Schedule", "@every 1s", "Nats-Schedule-Target", subject, "Nats-Schedule-TTL", "1s"))
	add("Nats-Schedule to a purge", true, hs("Nats-Schedule", "@at 2000-01-01T00:00:00Z", "Nats-Schedule-Target", subject, "Nats-Rollup", "sub"))
	add("KV purge", true, hs("KV-Operation", "PURGE", "Nats-Rollup", "sub"))
	if stream != ledger.StreamName(rigLedger) {
		add("a batch", true, hs("Nats-Batch-Id", id, "Nats-Batch-Sequence", "1", "Nats-Batch-Commit", "1"))
	} else {
		add("a batch of one", false, hs("Nats-Batch-Id", id, "Nats-Batch-Sequence", "1", "Nats-Batch-Commit", "1"))
		add("a batch left open", false, hs("Nats-Batch-Id", id+"o", "Nats-Batch-Sequence", "1"))
		add("a batch with a gap", false, hs("Nats-Batch-Id", id+"g", "Nats-Batch-Sequence", "2", "Nats-Batch-Commit", "1"))
		add("a batch ended by eob", false, hs("Nats-Batch-Id", id+"e", "Nats-Batch-Sequence", "1", "Nats-Batch-Commit", "eob"))
		add("a batch commit of another value", false, hs("Nats-Batch-Id", id+"x", "Nats-Batch-Sequence", "1", "Nats-Batch-Commit", "x"))
		add("a batch id too long", false, hs("Nats-Batch-Id", strings.Repeat("b", 65), "Nats-Batch-Sequence", "1", "Nats-Batch-Commit", "1"))
	}
	add("no headers", false, hs())
	add("Nats-Expected-Stream: another", false, hs("Nats-Expected-Stream", "OTHER"))
	add("Nats-Expected-Stream: its own", false, hs("Nats-Expected-Stream", stream))
	for _, v := range []string{"0", "1", "999999"} {
		add("Nats-Expected-Last-Sequence: "+v, false, hs("Nats-Expected-Last-Sequence", v))
		add("Nats-Expected-Last-Subject-Sequence: "+v, false, hs("Nats-Expected-Last-Subject-Sequence", v))
		if !s.long {
			break
		}
	}
	add("Nats-Expected-Last-Subject-Sequence-Subject", false, hs("Nats-Expected-Last-Subject-Sequence", "1", "Nats-Expected-Last-Subject-Sequence-Subject", ledger.SubjectPrefix(rigLedger)+"audit"))
	add("Nats-Expected-Last-Msg-Id", false, hs("Nats-Expected-Last-Msg-Id", "quarantine/1"))
	// Message ids another writer will use: the admin's quarantine notices
	// of the next seqs (before their nonce), a dead letter of another
	// consumer, a commit's part.
	head := s.head()
	for i := range ledger.Seq(3) {
		add(fmt.Sprintf("Nats-Msg-Id of a quarantine of seq %d", head+i), false, hs("Nats-Msg-Id", fmt.Sprintf("quarantine/%d", head+i)))
		if !s.long {
			break
		}
	}
	add("Nats-Msg-Id of audit's dead letter", false, hs("Nats-Msg-Id", fmt.Sprintf("audit/%d", head)))
	add("Nats-Msg-Id of a commit part", false, hs("Nats-Msg-Id", id+"/1"))
	add("Nats-Marker-Reason: MaxAge", false, hs("Nats-Marker-Reason", "MaxAge"))
	add("Nats-Marker-Reason: Purge", false, hs("Nats-Marker-Reason", "Purge"))
	add("KV-Operation: DEL", false, hs("KV-Operation", "DEL"))
	add("Nats-Required-Api-Level", false, hs("Nats-Required-Api-Level", "99"))
	for _, dest := range []string{ledger.QuarantineSubject(rigLedger), natsjs.StoredPrefix(rigLedger) + "audit", "_INBOX.sweep"} {
		sets = append(sets, headerSet{name: "Nats-Trace-Dest: " + dest, h: hs("Nats-Trace-Dest", dest), via: dest},
			headerSet{name: "Nats-Trace-Dest and Nats-Trace-Only: " + dest, h: hs("Nats-Trace-Dest", dest, "Nats-Trace-Only", "true"), via: dest})
	}
	add("forged server headers", false, hs("Nats-Stream", stream, "Nats-Subject", ledger.SubjectPrefix(rigLedger)+"audit",
		"Nats-Sequence", "1", "Nats-Time-Stamp", "2001-01-01T00:00:00Z", "Nats-Last-Sequence", "0", "Nats-Num-Pending", "0"))
	add("a stored end-of-batch status", false, hs("Status", "204", "Description", "EOB", "Nats-Num-Pending", "0"))
	// Hidden blocks: a blank line hides what the server appends; padded so
	// that what a parser stops at, written out, is as long as the block.
	forged := "Nats-Stream:" + stream + "\nNats-Subject:" + ledger.SubjectPrefix(rigLedger) + "audit\nNats-Sequence:1\nNats-Time-Stamp:2001-01-01T00:00:00Z\n"
	sets = append(sets,
		headerSet{name: "a hidden block", raw: "NATS/1.0\r\n" + forged + "\r\nX: y\r\n\r\n"},
		headerSet{name: "a hidden end-of-batch status", raw: "NATS/1.0\r\nStatus: 204\r\nDescription: EOB\r\nNats-Num-Pending: 0\r\n\r\n\r\n"},
		headerSet{name: "a hidden block padded to the server's length", raw: "NATS/1.0\n" + forged + strings.Repeat("P:v\n", 48) + "\n\r\n"},
	)
	if !s.long {
		// One of each kind in the short form: the first of each name's
		// first word.
		seen := map[string]bool{}
		var short []headerSet
		for _, x := range sets {
			k, _, _ := strings.Cut(x.name, ":")
			if !seen[k] || x.destructive {
				seen[k] = true
				short = append(short, x)
			}
		}
		sets = short
	}
	return sets
}

func (s *sw) head() ledger.Seq {
	s.t.Helper()
	n, err := s.log.LastSeq(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// target is one subject a data grant lets its role publish to, with a body
// a reader takes there (a fresh event, a beat, object metadata …).
type target struct {
	subject, stream string
	body            func() []byte
	// existing: it holds what an honest user stored: only destructive
	// header sets are tried on it (they must be refused); the rest go to
	// fresh subjects, and are the role's writes.
	existing bool
}

// targets are the subjects data grant g names, as a role would publish.
func (s *sw) targets(t *testing.T, g natsauth.Grant) []target {
	hb, swamp := natsjs.HeartbeatBucket(rigLedger), natsjs.SwampBucket(rigLedger)
	fixed := func(b string) func() []byte { return func() []byte { return []byte(b) } }
	switch {
	case g.Subject == ledger.SubjectPrefix(rigLedger)+">":
		fresh := func() []byte {
			s.n++
			p := fmt.Sprintf("sw%d", s.n)
			e := ledger.Event{V: ledger.FormatVersion, Ledger: s.uuid, Host: "web-1", At: time.Now(), Message: "sweep " + p,
				Partition: p, ModelSeq: 1, Parts: 1, Part: 1, Entries: []ledger.Entry{{Path: p + "/gone", Deleted: true}}}
			e.Commit, _ = ledger.NewCommitID(randReader{})
			b, err := ledger.EncodeEvent(e)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		// The subject of each fresh event is its own partition's: set per
		// publish (subjectOf).
		return []target{
			{subject: "", stream: ledger.StreamName(rigLedger), body: fresh},
			{subject: ledger.Subject(rigLedger, "audit"), stream: ledger.StreamName(rigLedger), body: fixed(`{"v":1}`), existing: true},
			{subject: ledger.Subject(rigLedger, "data--t--m"), stream: ledger.StreamName(rigLedger), body: fixed(`{"v":1}`), existing: true},
		}
	case strings.HasPrefix(g.Subject, "$KV."+hb+"."):
		host := strings.TrimPrefix(g.Subject, "$KV."+hb+".")
		beat := func() []byte {
			b, _ := json.Marshal(heartbeat.Beat{Host: host, HWM: 1, Head: 1, Time: time.Now().UTC(), Command: "sweep"})
			return b
		}
		return []target{{subject: g.Subject, stream: natsjs.KVStream(hb), body: beat}}
	case g.Subject == "$KV."+swamp+".>":
		return []target{
			{subject: "$KV." + swamp + ".sweep", stream: natsjs.KVStream(swamp), body: fixed("sweep")},
			{subject: "$KV." + swamp + ".lock.model", stream: natsjs.KVStream(swamp), body: fixed("stolen"), existing: true},
			{subject: "$KV." + swamp + ".control.vault", stream: natsjs.KVStream(swamp), body: fixed("stolen"), existing: true},
		}
	case g.Subject == natsblob.ChunkSubjects(rigBucket):
		return []target{{subject: "$O." + rigBucket + ".C.sweep", stream: natsblob.StreamName(rigBucket), body: fixed("chunk")}}
	case g.Subject == natsblob.MetaSubjects(rigBucket):
		meta := func() []byte {
			s.n++
			b, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("sweep/%d", s.n), "bucket": rigBucket, "nuid": "sweep", "size": 5, "chunks": 1,
				"digest": "SHA-256=" + base64.URLEncoding.EncodeToString(sha256.New().Sum(nil))})
			return b
		}
		var existing []target
		for subj := range s.objectMeta(t) {
			existing = append(existing, target{subject: subj, stream: natsblob.StreamName(rigBucket), body: meta, existing: true})
			if !s.long {
				break
			}
		}
		return append([]target{{subject: "", stream: natsblob.StreamName(rigBucket), body: meta}}, existing...)
	case strings.HasPrefix(g.Subject, natsjs.DeadLetterSubject(rigLedger, "")):
		return []target{{subject: g.Subject, stream: natsjs.DeadLetterStream(rigLedger), body: fixed(`{"dead":"letter"}`)}}
	}
	return nil
}

// objectMeta returns the object store's metadata subjects.
func (s *sw) objectMeta(t *testing.T) map[string]bool {
	out := map[string]bool{}
	dg := directget.Stream{Conn: s.admin.nc, Name: natsblob.StreamName(rigBucket)}
	if err := dg.Scan(t.Context(), natsblob.MetaSubjects(rigBucket), 1, func(m directget.Msg) error {
		out[m.Subject] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// randReader is crypto/rand for a commit id.
type randReader struct{}

func (randReader) Read(p []byte) (int, error) { return rand.Read(p) }

// data tries a publish grant on data subjects: a deny with every header set
// is refused; an allow with every header set on each of its targets —
// destructive sets refused by the stream, the rest the role's writes, after
// which unchanged (and, per role, the readers) decide.
func (s *sw) data(t *testing.T, a *attacker, r sweepRole, perms *natsauth.Permissions, g natsauth.Grant) {
	subj := strings.ReplaceAll(strings.ReplaceAll(g.Subject, ">", "sweep"), "*", "sweep")
	if g.Deny || strings.HasPrefix(g.Subject, "_SYNCLEDGER.") {
		for _, hset := range s.headerSets(subj, "") {
			if hset.raw != "" {
				continue
			}
			m := nats.NewMsg(subj)
			m.Header, m.Data = hset.h, []byte("{}")
			if !g.Deny {
				// A version marker: nothing reads it, nothing answers.
				want := hset.via == "" || permitted(perms, hset.via)
				if got := !a.publishRefused(m); got != want {
					t.Errorf("%s: a publish to %s with %s let through: %v, want %v", a.who, subj, hset.name, got, want)
				}
				continue
			}
			if got := a.send(m); got != "" {
				t.Errorf("%s: a publish to %s with %s answered, and it is denied: %s", a.who, subj, hset.name, got)
			}
		}
		return
	}
	tgs := s.targets(t, g)
	if len(tgs) == 0 {
		t.Fatalf("no target for the grant %s", g.Subject)
	}
	stored := 0
	for _, tg := range tgs {
		for _, hset := range s.headerSets(tg.subject, tg.stream) {
			if tg.existing && !hset.destructive {
				continue
			}
			body := tg.body()
			subject := tg.subject
			if subject == "" {
				subject = subjectOf(t, tg.stream, body)
			}
			if !permitted(perms, subject) {
				t.Fatalf("target %s is not the role's", subject)
			}
			if hset.raw != "" {
				if s.rawPublish(t, r, subject, hset.raw, body) {
					stored++
				}
				continue
			}
			m := nats.NewMsg(subject)
			m.Header, m.Data = hset.h, body
			got := a.send(m)
			switch {
			case hset.via != "" && !permitted(perms, hset.via):
				if got != "" {
					t.Errorf("%s: a publish to %s with %s let through, and the role may not publish to %s: %s", a.who, subject, hset.name, hset.via, got)
				}
			case got == "":
				t.Errorf("%s: a publish to %s with %s refused by the permissions", a.who, subject, hset.name)
			case hset.destructive && !strings.Contains(got, `"error"`):
				t.Errorf("%s: a publish to %s with %s was stored: %s", a.who, subject, hset.name, got)
			case !strings.Contains(got, `"error"`):
				stored++
			}
		}
	}
	t.Logf("%d publishes stored (the role's writes)", stored)
}

// subjectOf is the subject a fresh body goes to: its event's partition's,
// or its object's metadata subject.
func subjectOf(t *testing.T, stream string, body []byte) string {
	if stream == ledger.StreamName(rigLedger) {
		e, err := ledger.DecodeEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		return ledger.Subject(rigLedger, e.Partition)
	}
	var m struct{ Name string }
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return natsblob.MetaSubjects(rigBucket)[:len(natsblob.MetaSubjects(rigBucket))-1] + base64.URLEncoding.EncodeToString([]byte(m.Name))
}

// send publishes m with a reply subject and returns the server's answer, ""
// if it refused the publish for the user's permissions.
func (a *attacker) send(m *nats.Msg) string {
	a.t.Helper()
	if m.Header.Get("Nats-Batch-Id") != "" && m.Header.Get("Nats-Batch-Commit") == "" {
		// A batch's message before its commit is answered only if the
		// stream refuses it.
		if got, ok := a.exchange(m, time.Second); ok {
			return got
		}
		return `(no answer: a batch's first message)`
	}
	got, ok := a.exchange(m, 5*time.Second)
	if !ok {
		a.t.Fatalf("%s: no answer and no refusal of a publish to %s", a.who, m.Subject)
	}
	return got
}

// publishRefused publishes m without a reply subject (to what nothing
// answers) and reports whether the server refused it for the user's
// permissions.
func (a *attacker) publishRefused(m *nats.Msg) bool {
	a.t.Helper()
	from := a.mark()
	if err := a.nc.PublishMsg(m); err != nil {
		a.t.Fatal(err)
	}
	return a.refusedSince(from) > 0
}

// mark is where refusedSince counts from: the errors reported so far.
func (a *attacker) mark() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.errs)
}

var sentinels atomic.Int64

// refusedSince returns how many of what the user sent since mark from the
// server refused for its permissions. It sends a publish every role below
// the admin is refused (a stream delete of a stream that does not exist)
// and waits for its refusal: the server takes a connection's messages in
// order and reports their refusals in order, so once that one's is here,
// every earlier one is.
func (a *attacker) refusedSince(from int) int {
	a.t.Helper()
	sentinel := fmt.Sprintf("$JS.API.STREAM.DELETE.SWEEP_SENTINEL_%d", sentinels.Add(1))
	if err := a.nc.Publish(sentinel, nil); err != nil {
		a.t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		a.t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		a.mu.Lock()
		more := a.more
		errs := a.errs[from:]
		a.mu.Unlock()
		n := 0
		for _, e := range errs {
			if strings.Contains(e, sentinel) {
				return n
			}
			if strings.Contains(e, "Permissions Violation") {
				n++
			}
		}
		select {
		case <-more:
		case <-deadline:
			a.t.Fatalf("%s: the server did not refuse %s in 10 s: the refusals before it cannot be counted", a.who, sentinel)
		}
	}
}

// rawPublish sends body to subject as role r's user with the header block
// hdr exactly as given (HPUB) and reports whether the stream stored it.
func (s *sw) rawPublish(t *testing.T, r sweepRole, subject, hdr string, body []byte) bool {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if _, err := br.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	connect, _ := json.Marshal(map[string]any{"verbose": false, "headers": true, "protocol": 1, "user": r.user, "pass": r.pw})
	fmt.Fprintf(conn, "CONNECT %s\r\nSUB _INBOX.raw 1\r\nHPUB %s _INBOX.raw %d %d\r\n%s%s\r\nPING\r\n", connect, subject, len(hdr), len(hdr)+len(body), hdr, body)
	deadline := time.Now().Add(5 * time.Second)
	_ = conn.SetReadDeadline(deadline)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("raw publish to %s: %v", subject, err)
		}
		switch {
		case strings.HasPrefix(line, "-ERR"):
			t.Fatalf("raw publish to %s refused: %s", subject, line)
		case strings.HasPrefix(line, "MSG ") || strings.HasPrefix(line, "HMSG "):
			f := strings.Fields(line)
			n, _ := strconv.Atoi(f[len(f)-1])
			payload := make([]byte, n+2)
			if _, err := io.ReadFull(br, payload); err != nil {
				t.Fatal(err)
			}
			return !strings.Contains(string(payload), `"error"`)
		}
		// A PONG (or the server's PING, INFO): the stream's answer follows.
	}
}

// flood sends a thousand of what each role may try (short: twenty): consumer
// and stream creates (refused); a host's commits, swamp keys, object
// metadata and open batches (the role's writes); a tooling user's gets,
// fetches and dead letters.
func (s *sw) flood(t *testing.T, a *attacker, r sweepRole, perms *natsauth.Permissions) {
	n := 20
	if s.long {
		n = 1000
	}
	before := a.violations()
	refusedWant := 0
	pub := func(subj string, h nats.Header, body []byte) {
		m := nats.NewMsg(subj)
		if h != nil {
			m.Header = h
		}
		m.Data = body
		m.Reply = a.nc.NewRespInbox()
		if err := a.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if !permitted(perms, subj) {
			refusedWant++
		}
	}
	for i := range n {
		st := sweepStreams[i%len(sweepStreams)]
		cfg, _ := json.Marshal(map[string]any{"stream_name": st, "config": map[string]any{"durable_name": fmt.Sprintf("flood%d", i), "ack_policy": "explicit"}})
		pub("$JS.API.CONSUMER.DURABLE.CREATE."+st+"."+fmt.Sprintf("flood%d", i), nil, cfg)
		pub("$JS.API.CONSUMER.CREATE."+st, nil, cfg)
		sc, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("FLOOD%d", i), "subjects": []string{fmt.Sprintf("flood.%d", i)}})
		pub("$JS.API.STREAM.CREATE."+fmt.Sprintf("FLOOD%d", i), nil, sc)
	}
	switch r.role {
	case natsauth.RoleHost:
		tg := s.targets(t, natsauth.Grant{Subject: ledger.SubjectPrefix(rigLedger) + ">"})[0]
		for i := range n {
			body := tg.body()
			pub(subjectOf(t, tg.stream, body), nats.Header{"Nats-Msg-Id": []string{fmt.Sprintf("flood-%d", i)}}, body)
			pub("$KV."+natsjs.SwampBucket(rigLedger)+fmt.Sprintf(".flood.%d", i), nil, []byte("flood"))
			meta := s.targets(t, natsauth.Grant{Subject: natsblob.MetaSubjects(rigBucket)})[0]
			mb := meta.body()
			pub(subjectOf(t, meta.stream, mb), nil, mb)
		}
		// Open batches, never committed: the stream's in-flight slots.
		for i := range min(n, 100) {
			body := tg.body()
			pub(subjectOf(t, tg.stream, body), nats.Header{"Nats-Batch-Id": []string{fmt.Sprintf("open-%d-%d", s.n, i)}, "Nats-Batch-Sequence": []string{"1"}}, body)
		}
	case natsauth.RoleTooling:
		for i := range n {
			pub("$JS.API.DIRECT.GET."+ledger.StreamName(rigLedger), nil, []byte(`{"seq":1,"batch":100}`))
			for _, c := range r.scope.Consumers {
				pub(natsjs.DeadLetterSubject(rigLedger, c), nil, []byte(fmt.Sprintf(`{"flood":%d}`, i)))
				pub("$JS.API.CONSUMER.MSG.NEXT."+ledger.StreamName(rigLedger)+"."+c, nil, []byte(`{"batch":1,"no_wait":true}`))
			}
		}
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if !a.waitViolations(before+refusedWant, 60*time.Second) {
		t.Errorf("%s: %d of %d refused", a.who, a.violations()-before, refusedWant)
	}
	t.Logf("flood of %d: %d refused", n, refusedWant)
	// An honest commit of three partitions (a batch) goes through once the
	// open batches expire, whatever their number.
	if r.role == natsauth.RoleHost {
		deadline := time.Now().Add(60 * time.Second)
		for i := 0; ; i++ {
			for _, p := range []string{"data/t/f/1/raw", "data/t/g/1/raw", "audit/flood"} {
				put(t, s.cache("web-2"), p, fmt.Sprintf("after the flood %d %d", s.n, i))
			}
			res := cli(t, s.env["web-2"], "--cache", s.cache("web-2"), "commit", "-m", "after the flood")
			if res.code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an honest batch after the flood of open batches: exit %d\n%s", res.code, res.stderr)
			}
			t.Logf("an honest batch during the flood of open batches: exit %d (%s); again", res.code, firstLine(res.stderr))
			time.Sleep(2 * time.Second)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// readersRead checks, after a role's attacks, that every honest host
// converges and every reader reads: both hosts sync to the same files, the
// running watch applies a new commit, log --follow and tail print it, the
// dashboard shows it, the audit consumer records it, and hosts, log,
// status, dead letters and the snapshot listing answer.
func (s *sw) readersRead(t *testing.T, role string) {
	t.Helper()
	msg := "after " + role
	s.commit("web-1", "audit/"+role, msg, msg)
	for _, c := range []string{"web-1", "web-2"} {
		s.ok(c, "--cache", s.cache(c), "sync")
	}
	a, b := tree(t, s.cache("web-1")), tree(t, s.cache("web-2"))
	if d := cmp.Diff(a, b); d != "" {
		t.Fatalf("web-1 and web-2 differ after the %s attacks (-web-1 +web-2):\n%s", role, d)
	}
	s.followOut.wait(t, s.follow, msg)
	s.tailOut.wait(t, s.tail, msg)
	waitCommit(t, s.uiURL, msg)
	deadline := time.Now().Add(30 * time.Second)
	for tree(t, s.cache("web-3"))["audit/"+role] != msg {
		if time.Now().After(deadline) {
			t.Fatalf("the watch of web-3 did not apply %q; stderr:\n%s", msg, s.watch.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.waitAudit(t)
	var hosts struct {
		Hosts []struct {
			Host string `json:"host"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(s.ok("grafana", "hosts", "--json")), &hosts); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hosts.Hosts {
		names = append(names, h.Host)
	}
	for _, h := range []string{"web-1", "web-2", "web-3"} {
		if !slices.Contains(names, h) {
			t.Errorf("hosts lists %v, not %s", names, h)
		}
	}
	if out := s.ok("grafana", "log"); !strings.Contains(out, msg) {
		t.Errorf("log lacks %q:\n%s", msg, out)
	}
	s.ok("web-2", "--cache", s.cache("web-2"), "status")
	s.ok("hooker", "consume", "dead-letters", "hook")
	s.ok("ops", "snapshot", "--list")
}

// waitAudit waits until the audit file holds every commit of the ledger.
func (s *sw) waitAudit(t *testing.T) {
	t.Helper()
	commits := map[string]bool{}
	if err := s.log.Read(t.Context(), 1, 0, func(r ledger.Record) error {
		if r.Skip == nil {
			commits[r.Event.Commit] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]bool{}
		b, _ := os.ReadFile(s.auditFile)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var sum struct {
				Commit string `json:"commit"`
			}
			if json.Unmarshal([]byte(l), &sum) == nil && !s.quarantined[sum.Commit] {
				got[sum.Commit] = true
			}
		}
		if maps.Equal(got, commits) {
			return
		}
		if time.Now().After(deadline) {
			var missing []string
			for c := range commits {
				if !got[c] {
					missing = append(missing, c)
				}
			}
			t.Fatalf("the audit file lacks %d of %d commits (%v …); consume audit's stderr:\n%s", len(missing), len(commits), missing[:min(3, len(missing))], s.audit.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unscopedHeartbeats is the bound of a host user not scoped to its host id:
// it may write any host's beat (monitoring only); a scoped one may not.
func (s *sw) unscopedHeartbeats(t *testing.T) {
	key := "$KV." + natsjs.HeartbeatBucket(rigLedger) + "." + heartbeat.Key("web-2")
	beat, _ := json.Marshal(heartbeat.Beat{Host: "web-2", HWM: 1, Head: 1, Time: time.Now().UTC(), Command: "forged"})
	scopedHost := s.connect(t, "web-1", "web-1-pw")
	m := nats.NewMsg(key)
	m.Data = beat
	if got := scopedHost.send(m); got != "" {
		t.Errorf("a host scoped to web-1 wrote web-2's beat: %s", got)
	}
	anyHost := s.connect(t, "web-any", "web-any-pw")
	m = nats.NewMsg(key)
	m.Data = beat
	if got := anyHost.send(m); got == "" || strings.Contains(got, `"error"`) {
		t.Errorf("an unscoped host's beat for web-2: %q", got)
	}
	out := s.ok("grafana", "hosts")
	if !strings.Contains(out, "forged") && !strings.Contains(out, "web-2") {
		t.Errorf("hosts after an unscoped host wrote web-2's beat:\n%s", out)
	}
	// web-2's next sync writes its own beat over it.
	s.ok("web-2", "--cache", s.cache("web-2"), "sync")
}

// final: locks are exclusive, the audit file complete, every honest host,
// a fresh one and a rebuilt one hold the same files.
func (s *sw) final(t *testing.T) {
	s.unchanged(t)
	var wins, conflicts int
	for _, u := range [][2]string{{"web-1", "web-1-pw"}, {"web-2", "web-2-pw"}, {"web-3", "web-3-pw"}} {
		h := s.connect(t, u[0], u[1])
		kv, err := h.js.KeyValue(t.Context(), natsjs.SwampBucket(rigLedger))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Create(t.Context(), "lock.final", []byte(u[0])); err != nil {
			conflicts++
		} else {
			wins++
		}
	}
	if wins != 1 || conflicts != 2 {
		t.Errorf("a lock taken by three hosts: %d took it, %d were refused", wins, conflicts)
	}
	s.preemptedQuarantine(t)
	s.readersRead(t, "the sweep")
	checkConverged(&shell{t: t, env: s.env["web-2"]}, s.caches)
	if code := s.audit.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("consume audit exit %d; stderr:\n%s", code, s.audit.stderr)
	}
}

// preemptedQuarantine: a host stores a message under the message id the
// admin's quarantine notice of a seq would carry without its nonce, and the
// admin quarantines that seq: the notice is stored and listed (the seq is one
// of the host's own events, a delete of a path no one holds, so skipping it
// changes no host's files).
func (s *sw) preemptedQuarantine(t *testing.T) {
	host := s.connect(t, "web-1", "web-1-pw")
	tg := s.targets(t, natsauth.Grant{Subject: ledger.SubjectPrefix(rigLedger) + ">"})[0]
	var commit string
	publish := func(id string) uint64 {
		body := tg.body()
		e, err := ledger.DecodeEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		commit = e.Commit
		m := nats.NewMsg(subjectOf(t, tg.stream, body))
		m.Data = body
		if id != "" {
			m.Header.Set("Nats-Msg-Id", id)
		}
		var ack struct {
			Seq   uint64          `json:"seq"`
			Error json.RawMessage `json:"error"`
		}
		got := host.send(m)
		if err := json.Unmarshal([]byte(got), &ack); err != nil || ack.Seq == 0 || ack.Error != nil {
			t.Fatalf("a host's event (message id %q): %s", id, got)
		}
		return ack.Seq
	}
	seq := publish("")
	if s.quarantined == nil {
		s.quarantined = map[string]bool{}
	}
	s.quarantined[commit] = true
	publish(fmt.Sprintf("quarantine/%d", seq))
	s.ok("ops", "quarantine", strconv.FormatUint(seq, 10), "--force", "--reason", "sweep: a notice whose message id a host took first")
	var listed []quarantineRow
	if err := json.Unmarshal([]byte(s.ok("ops", "quarantine", "--list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(listed, func(r quarantineRow) bool { return r.Seq == ledger.Seq(seq) }) {
		t.Errorf("quarantine --list after quarantining seq %d, whose notice's id a host took first: %+v", seq, listed)
	}
}

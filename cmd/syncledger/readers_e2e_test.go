package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/natsauth"
)

// noConsumerCreates are the subjects of every consumer create, ordered or
// durable, on any stream.
var noConsumerCreates = []string{"$JS.API.CONSUMER.CREATE.>", "$JS.API.CONSUMER.DURABLE.CREATE.>"}

// serverNoConsumers starts a nats-server whose admin "ops" may do anything,
// and whose host user "web" and tooling user "grafana" have their role's
// permissions on the default ledger (blobs in its object store bucket) and
// may create no consumer at all. It returns the server's URL and each user's
// environment.
func serverNoConsumers(t *testing.T) (url string, admin, host, tool []string) {
	t.Helper()
	scope := natsauth.Scope{Ledger: "default", ObjectBucket: "syncledger-default"}
	users := []map[string]any{{"user": "ops", "password": "ops-pw"}}
	for _, u := range []struct {
		name string
		role natsauth.Role
	}{{"web", natsauth.RoleHost}, {"grafana", natsauth.RoleTooling}} {
		p, err := natsauth.For(u.role, scope)
		if err != nil {
			t.Fatal(err)
		}
		p.Publish.Deny = append(p.Publish.Deny, noConsumerCreates...)
		users = append(users, map[string]any{"user": u.name, "password": u.name + "-pw", "permissions": p})
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // nats-server's parser knows no \u escapes
	if err := enc.Encode(users); err != nil {
		t.Fatal(err)
	}
	conf := writeFile(t, filepath.Join(t.TempDir(), "server.conf"), "authorization { users: "+b.String()+" }\n")
	srv := natsjstest.RunServerConfig(t, conf)
	url = srv.ClientURL()
	env := func(user string) []string {
		return cliEnv("SYNCLEDGER_NATS="+url, "NATS_USER="+user, "NATS_PASSWORD="+user+"-pw")
	}
	return url, env("ops"), env("web"), env("grafana")
}

// consumerCount returns how many consumers the server's streams hold, all
// of them.
func consumerCount(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	n := 0
	lister := js.ListStreams(t.Context())
	for info := range lister.Info() {
		n += info.State.Consumers
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReadersHoldNoConsumer is issue 38's read path from the outside: on a
// server whose host and tooling users may create no consumer of any kind,
// hosts commit, sync, watch and rebuild from a snapshot (hydration); the
// host and the tooling user follow the log, tail it, list the hosts and run
// the dashboard, and each sees a commit made while it runs. No stream holds
// a consumer while they run, nor after they are killed.
func TestReadersHoldNoConsumer(t *testing.T) {
	t.Parallel()
	url, admin, host, tool := serverNoConsumers(t)
	dir := t.TempDir()
	if r := cli(t, admin, "init"); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	as := func(env []string, h string) []string { return append(env[:len(env):len(env)], "SYNCLEDGER_HOST="+h) }
	ok := func(env []string, args ...string) string {
		t.Helper()
		r := cli(t, env, args...)
		if r.code != 0 {
			t.Fatalf("syncledger %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	commit := func(h, rel, msg string) {
		t.Helper()
		cache := filepath.Join(dir, h)
		put(t, cache, rel, msg)
		ok(as(host, h), "--cache", cache, "commit", "-m", msg)
	}
	commit("web-1", "data/command/shell/a/result/1/raw", "first")
	commit("web-2", "data/command/shell/b/result/1/raw", "second")
	ok(as(host, "web-1"), "--cache", filepath.Join(dir, "web-1"), "sync")

	// Hydration: a snapshot covers the log, which drops what it covers; a
	// new host rebuilds from it (the snapshot listing, the object store).
	ok(admin, "snapshot", "--retain-margin", "0")
	fresh := filepath.Join(dir, "web-3")
	if out := ok(as(host, "web-3"), "--cache", fresh, "rebuild", "--quiet"); !strings.Contains(out, "rebuilt from snapshot") {
		t.Fatalf("rebuild of a new host: %s", out)
	}
	if got := tree(t, fresh); got["data/command/shell/b/result/1/raw"] != "second" {
		t.Fatalf("the rebuilt host holds %v", got)
	}

	nc, err := nats.Connect(url, nats.UserInfo("ops", "ops-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if n := consumerCount(t, js); n != 0 {
		t.Fatalf("before the readers: %d consumers", n)
	}

	// The readers, as the host and as the tooling user.
	st, err := js.Stream(t.Context(), "SYNCLEDGER_default")
	if err != nil {
		t.Fatal(err)
	}
	next := fmt.Sprint(st.CachedInfo().State.LastSeq + 1)
	watch := startProc(t, as(host, "web-1"), "--cache", filepath.Join(dir, "web-1"), "watch")
	type reader struct {
		what string
		p    *proc
	}
	var readers []reader
	for _, u := range []struct {
		name string
		env  []string
	}{{"host", as(host, "web-9")}, {"tooling", tool}} {
		readers = append(readers,
			reader{u.name + " log --follow", startProc(t, u.env, "log", "--follow")},
			reader{u.name + " tail", startProc(t, u.env, "tail", "--from", next)})
	}
	var uis []string
	for _, env := range [][]string{as(host, "web-9"), tool} {
		p := startProc(t, env, "ui", "--listen", "127.0.0.1:0", "--json", "--poll", "100ms")
		var out struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal([]byte(p.line(t, `^\{`)), &out); err != nil {
			t.Fatalf("ui --json: %v", err)
		}
		uis = append(uis, out.URL)
		readers = append(readers, reader{"ui", p})
	}
	for _, r := range readers[:4] {
		if strings.Contains(r.what, "log") {
			r.p.line(t, "second") // caught up
		}
	}

	commit("web-2", "data/command/shell/c/result/1/raw", "third")
	watch.line(t, `^applied seq \d+`)
	for _, r := range readers[:4] {
		r.p.line(t, "third")
	}
	for _, u := range uis {
		waitCommit(t, u, "third")
	}
	for _, env := range [][]string{as(host, "web-9"), tool} {
		if out := ok(env, "hosts"); !strings.Contains(out, "web-1") || !strings.Contains(out, "web-2") {
			t.Errorf("hosts: %s", out)
		}
	}
	if r := cli(t, as(host, "web-2"), "--cache", filepath.Join(dir, "web-2"), "sync"); r.code != 0 {
		t.Fatalf("sync beside the readers: %+v", r)
	}
	if n := consumerCount(t, js); n != 0 {
		t.Fatalf("while 7 readers run: %d consumers", n)
	}

	// Killed, they leave nothing behind either.
	watch.kill()
	for _, r := range readers {
		r.p.kill()
	}
	if n := consumerCount(t, js); n != 0 {
		t.Fatalf("after the readers were killed: %d consumers", n)
	}
}

// waitCommit waits until the dashboard at url shows a commit whose message
// is msg.
func waitCommit(t *testing.T, url, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var st struct {
			Commits []struct {
				Message string `json:"message"`
			} `json:"commits"`
			Error string `json:"error"`
		}
		resp, err := http.Get(url + "api/state")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/api/state: %v", err)
		}
		for _, c := range st.Commits {
			if c.Message == msg {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the dashboard at %s shows no commit %q", url, msg)
}

// TestRePublishUpgradeCLI: a ledger made by the previous release (its stream
// does not republish what it stores) is used by this release's hosts, which
// name the repair; the repair as printed — an admin's upgrade — adds the
// setting and changes nothing else, and the hosts work.
func TestRePublishUpgradeCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, url, uuid := serveT(t, filepath.Join(dir, "data"))
	defer srv.stop(t, syscall.SIGTERM)
	env := cliEnv("SYNCLEDGER_NATS=" + url)
	cache := filepath.Join(dir, "h")
	put(t, cache, "data/command/shell/a/result/1/raw", "one")
	if r := cli(t, env, "--cache", cache, "commit", "-m", "one"); r.code != 0 {
		t.Fatalf("commit: %+v", r)
	}

	// As the previous release made it.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), "SYNCLEDGER_default")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.RePublish = nil
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}

	// Hosts of this release keep working on it (a rolling upgrade), and say
	// what the admin's upgrade adds.
	r := cli(t, env, "--cache", cache, "sync")
	if r.code != 0 || !strings.Contains(r.stderr, "does not republish") || !strings.Contains(r.stderr, "way out: syncledger upgrade") {
		t.Fatalf("sync on a ledger without its republish: exit %d, want it to work and to name syncledger upgrade\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, env, "upgrade"); r.code != 0 || !strings.Contains(r.stdout, "republish: none → ") {
		t.Fatalf("upgrade as the repair: %+v", r)
	}
	// init, run instead, changes nothing more and finds the ledger.
	if r := cli(t, env, "init"); r.code != 0 || strings.TrimSpace(r.stdout) != uuid {
		t.Fatalf("init after the repair: %+v", r)
	}
	if r := cli(t, env, "--cache", cache, "sync"); r.code != 0 {
		t.Fatalf("sync after the repair: %+v", r)
	}
	st, err = js.Stream(t.Context(), "SYNCLEDGER_default")
	if err != nil {
		t.Fatal(err)
	}
	got := st.CachedInfo().Config
	if got.RePublish == nil || got.Metadata["syncledger.uuid"] != uuid || got.DenyDelete != cfg.DenyDelete || strings.Join(got.Subjects, " ") != strings.Join(cfg.Subjects, " ") {
		t.Fatalf("after the repair: %+v", got)
	}
	got.RePublish = nil
	if d := cmp.Diff(cfg, got); d != "" {
		t.Errorf("the repair changed more than the republish (-before +after):\n%s", d)
	}
}

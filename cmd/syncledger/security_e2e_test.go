package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncledger/syncledger/embedded/embeddedtest"
)

// serveJSON starts serve with --json and returns the process and what it printed.
func serveJSON(t *testing.T, env []string, args ...string) (*proc, serveInfo) {
	t.Helper()
	p := startProc(t, env, append([]string{"serve", "--json"}, args...)...)
	var info serveInfo
	if err := json.Unmarshal([]byte(p.line(t, `^\{`)), &info); err != nil {
		t.Fatalf("serve --json: %v", err)
	}
	return p, info
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeUsersTLS runs serve on a wildcard address with users of each role
// and mutual TLS, all certificates made by the test, and the ledger's blobs in
// a NATS object store: a host (nkey) commits (uploading to the object store)
// and syncs, the read-only tooling user reads the log and the hosts and runs a
// durable consumer, and clients without the CA, without a client certificate
// or with a wrong password are turned away with a hint.
func TestServeUsersTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := embeddedtest.Certificates(t, dir)
	hostKey := embeddedtest.NewNkey(t)
	seed := writeFile(t, filepath.Join(dir, "host.nk"), hostKey.Seed+"\n")
	users := writeFile(t, filepath.Join(dir, "users.yaml"), `users:
  - {user: ops, password: ops-pw, role: admin}
  - {nkey: `+hostKey.Public+`, role: host}
  - {user: grafana, password: graf-pw, role: tooling, consumers: [audit]}
`)
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users), "--listen", "0.0.0.0:0", "--data", filepath.Join(dir, "data"),
		"--tls-cert", c.ServerCert, "--tls-key", c.ServerKey, "--tls-ca", c.CA, "--tls-verify", "--blobs", "nats://syncledger-default")
	if !strings.HasPrefix(info.URL, "tls://127.0.0.1:") || !info.TLS || info.Auth != "users" {
		t.Fatalf("serve --json: %+v", info)
	}
	tlsEnv := []string{"SYNCLEDGER_NATS=" + info.URL, "NATS_CA=" + c.CA, "NATS_CERT=" + c.ClientCert, "NATS_KEY=" + c.ClientKey}
	host := cliEnv(append(tlsEnv, "NATS_NKEY="+seed, "SYNCLEDGER_HOST=web-1")...)
	tool := cliEnv(append(tlsEnv, "NATS_USER=grafana", "NATS_PASSWORD=graf-pw")...)

	cache := filepath.Join(dir, "cache")
	writeFile(t, filepath.Join(cache, "data/command/shell/vpc/result/1/raw"), "vpc-0abc\n")
	if r := cli(t, host, "--cache", cache, "commit", "-m", "over TLS"); r.code != 0 {
		t.Fatalf("host commit: %+v", r)
	}
	if r := cli(t, host, "--cache", cache, "sync"); r.code != 0 {
		t.Fatalf("host sync: %+v", r)
	}
	if r := cli(t, tool, "log"); r.code != 0 || !strings.Contains(r.stdout, "over TLS") {
		t.Errorf("tooling log: %+v", r)
	}
	var hosts struct {
		Head  uint64    `json:"head"`
		Hosts []hostRow `json:"hosts"`
	}
	r := cli(t, tool, "hosts", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &hosts); r.code != 0 || err != nil || len(hosts.Hosts) != 1 ||
		hosts.Hosts[0].Host != "web-1" || hosts.Hosts[0].HWM != 1 {
		t.Errorf("tooling hosts --json: %+v (%v)", r, err)
	}
	// A durable consumer the admin made, run by the tooling user it was named
	// for (the dead letters were made with the ledger); SIGINT stops it
	// cleanly.
	if r := cli(t, cliEnv(append(tlsEnv, "NATS_USER=ops", "NATS_PASSWORD=ops-pw")...), "consume", "create", "audit"); r.code != 0 {
		t.Fatalf("admin consume create: %+v", r)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	cons := startProc(t, tool, "consume", "audit", "--file", audit)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(audit); strings.Contains(string(b), `"message":"over TLS"`) {
			break
		}
		if time.Now().After(deadline) {
			cons.kill()
			t.Fatalf("the tooling user's audit consumer wrote nothing; stderr:\n%s", cons.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := cons.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("consume audit exit %d after SIGINT; stderr %s", code, cons.stderr)
	}
	if r := cli(t, tool, "consume", "status", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"audit"`) {
		t.Errorf("tooling consume status: %+v", r)
	}

	// The configuration in effect shows the file names, never the password.
	if r := cli(t, tool, "config", "show"); r.code != 0 || strings.Contains(r.stdout, "graf-pw") ||
		!strings.Contains(r.stdout, c.ClientKey) || !strings.Contains(r.stdout, "nats-password: REDACTED") {
		t.Errorf("config show: %+v", r)
	}

	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no CA", cliEnv("SYNCLEDGER_NATS="+info.URL, "NATS_USER=grafana", "NATS_PASSWORD=graf-pw"), "check TLS"},
		{"no client certificate", cliEnv("SYNCLEDGER_NATS="+info.URL, "NATS_CA="+c.CA, "NATS_USER=grafana", "NATS_PASSWORD=graf-pw"), "connect to NATS"},
		{"wrong password", cliEnv(append(tlsEnv, "NATS_USER=grafana", "NATS_PASSWORD=nope")...), "check the credentials"},
		{"half a client certificate", cliEnv("SYNCLEDGER_NATS="+info.URL, "NATS_CERT="+c.ClientCert), "--nats-cert and --nats-key"},
		{"two ways to log in", cliEnv(append(tlsEnv, "NATS_USER=grafana", "NATS_PASSWORD=graf-pw", "NATS_NKEY="+seed)...), "more than one way"},
	} {
		if r := cli(t, tc.env, "log"); r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "graf-pw") {
			t.Errorf("%s: %+v; want a failure mentioning %q", tc.name, r, tc.want)
		}
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exit %d after SIGTERM; stderr %s", code, srv.stderr)
	}
}

func TestDashboardRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	env := cliEnv("SYNCLEDGER_NATS=nats://127.0.0.1:1")
	for _, args := range [][]string{
		{"ui", "--listen", "0.0.0.0:0"},
		{"serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--ui", "0.0.0.0:0"},
	} {
		if r := cli(t, env, args...); r.code != exitUsage || !strings.Contains(r.stderr, "not a loopback address") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

func TestConfigPermissionsCommand(t *testing.T) {
	t.Parallel()
	r := cli(t, cliEnv(), "--ledger", "prod", "config", "permissions", "--user", "web-1:host", "--user", "grafana:tooling")
	if r.code != 0 || !strings.Contains(r.stdout, `"syncledger.prod.p.>"`) ||
		!strings.Contains(r.stdout, `{user: "web-1", password: $SYNCLEDGER_PASSWORD_WEB_1, permissions: $SYNCLEDGER_HOST}`) ||
		!strings.Contains(r.stdout, `"$O.syncledger-prod.C.>"`) {
		t.Errorf("config permissions: %+v", r)
	}
	if r := cli(t, cliEnv(), "config", "permissions", "--user", "x:root"); r.code != exitUsage {
		t.Errorf("bad role: %+v", r)
	}
}

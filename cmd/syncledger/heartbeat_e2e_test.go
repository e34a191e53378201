package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestBadHeartbeatIsOneRow is issue 38's point 6 from the attacker's side: a
// host credential publishes values that are no heartbeats straight to the
// heartbeat bucket's subjects (garbage, another host's beat under a key of its
// own, a key outside the KV API's alphabet). `hosts` (text and --json) and the
// dashboard still show every good host and report each bad row with how to
// remove it; `hosts forget KEY` removes it, and it is gone afterwards; a
// forget of nothing, or by a user who is not the admin (a host among them),
// fails naming why.
func TestBadHeartbeatIsOneRow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	users := writeFile(t, filepath.Join(dir, "users.yaml"), "users:\n  - {user: ops, password: ops-pw, role: admin}\n"+
		"  - {user: web, password: web-pw, role: host}\n  - {user: grafana, password: graf-pw, role: tooling}\n")
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users), "--listen", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data"), "--blobs", "file://"+filepath.Join(dir, "blobs"))
	defer srv.stop(t, syscall.SIGTERM)
	env := func(extra ...string) []string {
		return cliEnv(append([]string{"SYNCLEDGER_NATS=" + info.URL}, extra...)...)
	}
	web := env("NATS_USER=web", "NATS_PASSWORD=web-pw")
	tool := env("NATS_USER=grafana", "NATS_PASSWORD=graf-pw")
	admin := env("NATS_USER=ops", "NATS_PASSWORD=ops-pw")
	for _, h := range []string{"web-1", "web-2"} {
		cache := filepath.Join(dir, h)
		put(t, cache, "data/command/shell/"+h+"/result/1/raw", h)
		for _, c := range [][]string{{"commit", "-m", h}, {"sync"}} {
			if r := cli(t, append(web, "SYNCLEDGER_HOST="+h), append([]string{"--cache", cache}, c...)...); r.code != 0 {
				t.Fatalf("%s %s: %+v", h, c[0], r)
			}
		}
	}

	// The attacker: the host credential, through the raw API.
	nc, err := nats.Connect(info.URL, nats.UserInfo("web", "web-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	planted := map[string]string{
		"evil":     "not a heartbeat",
		"impostor": `{"host":"web-1","hwm":0}`,
		"odd~key":  `{"hwm":`,
	}
	for k, v := range planted {
		if _, err := js.Publish("$KV.SYNCLEDGER_HOSTS_default."+k, []byte(v)); err != nil {
			t.Fatalf("plant %s: %v", k, err)
		}
	}
	badKeys := slices.Sorted(func(yield func(string) bool) {
		for k := range planted {
			if !yield(k) {
				return
			}
		}
	})

	var list struct {
		Hosts []struct {
			Host string `json:"host"`
			HWM  uint64 `json:"hwm"`
		} `json:"hosts"`
		Skipped []struct {
			Key   string `json:"key"`
			Error string `json:"error"`
		} `json:"skipped"`
	}
	hostsJSON := func() ([]string, []string) {
		t.Helper()
		r := cli(t, tool, "hosts", "--json")
		list.Hosts, list.Skipped = nil, nil
		if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
			t.Fatalf("hosts --json with bad heartbeats: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		var hosts, bad []string
		for _, h := range list.Hosts {
			hosts = append(hosts, h.Host)
		}
		for _, b := range list.Skipped {
			bad = append(bad, b.Key)
			if b.Error == "" {
				t.Errorf("skipped %s without a reason", b.Key)
			}
		}
		return hosts, bad
	}
	hosts, bad := hostsJSON()
	if !slices.Equal(hosts, []string{"web-1", "web-2"}) || !slices.Equal(bad, badKeys) {
		t.Errorf("hosts --json: hosts %v, skipped %v; want web-1, web-2 and skipped %v", hosts, bad, badKeys)
	}
	r := cli(t, tool, "hosts")
	if r.code != 0 || !regexp.MustCompile(`(?m)^web-1 +\d`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^web-2 +\d`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, `skipped key "evil"`) || !strings.Contains(r.stdout, "syncledger hosts forget evil") {
		t.Errorf("hosts with bad heartbeats: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The dashboard: both hosts, and the bad rows as rows of their own.
	p := startProc(t, tool, "ui", "--listen", "127.0.0.1:0", "--json", "--poll", "100ms")
	var out struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.line(t, `^\{`)), &out); err != nil {
		t.Fatalf("ui --json: %v", err)
	}
	var st struct {
		Hosts []struct {
			Host  string `json:"host"`
			Error string `json:"error"`
		} `json:"hosts"`
		HostsError string `json:"hostsError"`
	}
	var good, rows []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(out.URL + "api/state")
		if err != nil {
			t.Fatal(err)
		}
		st.Hosts = nil
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/api/state: %v", err)
		}
		good, rows = nil, nil
		for _, h := range st.Hosts {
			if h.Error == "" {
				good = append(good, h.Host)
			} else {
				rows = append(rows, h.Host)
			}
		}
		if len(st.Hosts) > 0 || st.HostsError != "" {
			break
		}
	}
	if !slices.Equal(good, []string{"web-1", "web-2"}) || !slices.Equal(rows, badKeys) || st.HostsError != "" {
		t.Errorf("dashboard hosts %v, bad rows %v (error %q); want web-1, web-2 and %v", good, rows, st.HostsError, badKeys)
	}
	p.stop(t, syscall.SIGTERM)

	// forget: each bad key removed, and gone afterwards.
	for _, k := range badKeys {
		r := cli(t, admin, "hosts", "forget", k)
		if r.code != 0 || !strings.Contains(r.stdout, "removed key") {
			t.Errorf("hosts forget %s: exit %d\n%s%s", k, r.code, r.stdout, r.stderr)
		}
	}
	if hosts, bad := hostsJSON(); !slices.Equal(hosts, []string{"web-1", "web-2"}) || len(bad) != 0 {
		t.Errorf("after forget: hosts %v, skipped %v; want both hosts and nothing skipped", hosts, bad)
	}
	if r := cli(t, admin, "hosts", "forget", "web-2"); r.code != 0 || !strings.Contains(r.stdout, "forgot host web-2") {
		t.Errorf("hosts forget web-2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if hosts, _ := hostsJSON(); !slices.Equal(hosts, []string{"web-1"}) {
		t.Errorf("after forgetting web-2: hosts %v", hosts)
	}
	// Nothing of that name: a clear failure, not "removed".
	if r := cli(t, admin, "hosts", "forget", "web-2"); r.code == 0 || !strings.Contains(r.stderr, "no heartbeat of that host") {
		t.Errorf("hosts forget of a host gone already: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A user who is not the admin — a host, which writes the bucket, and the
	// tooling, which does not: refused by the server, naming the admin, and
	// nothing removed (issue 39: forget is the admin's, as docs/ops.md says).
	for who, e := range map[string][]string{"host": web, "tooling": tool} {
		if r := cli(t, e, "hosts", "forget", "web-1"); r.code == 0 || !strings.Contains(r.stderr, "permission") ||
			!strings.Contains(r.stderr, "only the admin role may forget") || strings.Contains(r.stdout, "forgot") {
			t.Errorf("%s hosts forget: exit %d\n%s%s", who, r.code, r.stdout, r.stderr)
		}
	}
	if hosts, _ := hostsJSON(); !slices.Equal(hosts, []string{"web-1"}) {
		t.Errorf("after a refused forget: hosts %v, want web-1 still", hosts)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

// TestCacheDiscovery: without --cache a command finds its cache by walking up to
// the nearest .syncledger/, as git finds its repository; outside any cache it
// exits 2, creates nothing and publishes nothing; a nested cache's state is never
// committed.
func TestCacheDiscovery(t *testing.T) {
	c := newCLI(t, "discover")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	noCache := func(r result, what string) {
		t.Helper()
		if r.code != 2 || !strings.Contains(r.stderr, "not in a syncledger cache") || !strings.Contains(r.stderr, "--cache") {
			t.Fatalf("%s outside a cache: exit %d, stderr %s", what, r.code, r.stderr)
		}
	}

	// A project directory: commit, sync, status, exec, watch there all refuse.
	project := t.TempDir()
	for _, f := range []string{".env", "notes.txt", "src/main.go"} {
		put(t, project, f, "secret stuff")
	}
	for _, args := range [][]string{
		{"commit", "-m", "oops"}, {"sync"}, {"status"}, {"verify"},
		{"exec", "--", "true"}, {"watch"}, {"rebuild"},
	} {
		noCache(cliIn(t, project, c.env, args...), strings.Join(args, " "))
		noCache(cliIn(t, filepath.Join(project, "src"), c.env, args...), "src: "+strings.Join(args, " "))
	}
	if _, err := os.Stat(filepath.Join(project, ledger.StateDir)); !os.IsNotExist(err) {
		t.Fatalf("a refused command made the project a cache: %v", err)
	}
	if out := c.ok("log"); strings.TrimSpace(out) != "" {
		t.Fatalf("something was published from outside a cache:\n%s", out)
	}

	// An explicit --cache makes a new cache; from a subdirectory of it, commands
	// find it and commit under the right paths.
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "data/command/shell/vpc/result/1/raw", "vpc")
	c.ok("--cache", a, "commit", "-m", "first")
	sub := filepath.Join(a, "data", "command")
	put(t, a, "data/command/shell/vpc/result/2/raw", "vpc 2")
	if r := cliIn(t, sub, c.env, "commit", "-m", "from a subdirectory"); r.code != 0 {
		t.Fatalf("commit in a subdirectory: exit %d %s", r.code, r.stderr)
	}
	if r := cliIn(t, sub, c.env, "status"); r.code != 0 || !strings.Contains(r.stdout, a) {
		t.Fatalf("status in a subdirectory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// SYNCLEDGER_CACHE names the cache from anywhere.
	if r := cliIn(t, project, append(append([]string{}, c.env...), "SYNCLEDGER_CACHE="+b), "sync"); r.code != 0 {
		t.Fatalf("sync with SYNCLEDGER_CACHE: exit %d %s", r.code, r.stderr)
	}
	want := map[string]string{"data/command/shell/vpc/result/1/raw": "vpc", "data/command/shell/vpc/result/2/raw": "vpc 2"}
	if got := tree(t, b); !cmp.Equal(got, want) {
		t.Fatalf("host b: %v, want %v", got, want)
	}

	// A nested cache inside a: its state is never committed by a, and commands
	// run inside it use it, not a.
	nested := filepath.Join(a, "data", "nested")
	c.ok("--cache", nested, "sync")
	put(t, nested, "audit/inner", "inner")
	if r := cliIn(t, nested, c.env, "status", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"cache": "`+nested+`"`) {
		t.Fatalf("status in the nested cache: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := cliIn(t, a, c.env, "commit", "--json")
	if r.code != 0 || strings.Contains(r.stdout, ".syncledger") {
		t.Fatalf("commit beside a nested cache: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.ok("--cache", b, "sync")
	for p := range tree(t, b) {
		if strings.Contains(p, ledger.StateDir) {
			t.Fatalf("a nested cache's state was published: %s", p)
		}
	}
}

// TestHostIDPerCache: two caches on one machine are two hosts; a cache keeps its
// id; --host overrides it.
func TestHostIDPerCache(t *testing.T) {
	c := newCLI(t, "hostid")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	c.ok("--cache", a, "sync")
	c.ok("--cache", b, "sync")
	id := func(cache string, args ...string) string {
		t.Helper()
		var st struct {
			Host string `json:"host"`
		}
		out := c.ok(append([]string{"--cache", cache}, append(args, "status", "--json")...)...)
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st.Host
	}
	hostname, _ := os.Hostname()
	ida, idb := id(a), id(b)
	if ida == idb || !strings.HasPrefix(ida, hostname+"-") || !strings.HasPrefix(idb, hostname+"-") {
		t.Fatalf("host ids %q and %q: want two distinct %s-XXXXXX", ida, idb, hostname)
	}
	if again := id(a); again != ida {
		t.Fatalf("cache a's id changed: %q then %q", ida, again)
	}
	if got := id(a, "--host", "explicit"); got != "explicit" {
		t.Fatalf("--host: status says %q", got)
	}
	out := c.ok("hosts", "--json")
	if !strings.Contains(out, `"`+ida+`"`) || !strings.Contains(out, `"`+idb+`"`) {
		t.Fatalf("hosts does not list both caches (%s, %s):\n%s", ida, idb, out)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncledger/syncledger/consumers/consumertest"
)

// jsonLines is the one decoder of --json output in the tests: out must be what
// writeJSON writes — one or more lines, each one compact JSON value and nothing
// else, the last ending in a newline. It returns the values.
func jsonLines(t *testing.T, what, out string) []json.RawMessage {
	t.Helper()
	if out == "" || !strings.HasSuffix(out, "\n") {
		t.Fatalf("%s: want JSON lines ending in a newline, got %q", what, out)
	}
	var vals []json.RawMessage
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(line)); err != nil || compact.String() != line {
			t.Fatalf("%s: line %d is not one compact JSON value (%v):\n%s", what, i+1, err, out)
		}
		vals = append(vals, json.RawMessage(line))
	}
	return vals
}

// decodeJSON decodes out, one line of --json output, into v.
func decodeJSON(t *testing.T, what, out string, v any) {
	t.Helper()
	vals := jsonLines(t, what, out)
	if len(vals) != 1 {
		t.Fatalf("%s: %d JSON lines, want one:\n%s", what, len(vals), out)
	}
	if err := json.Unmarshal(vals[0], v); err != nil {
		t.Fatalf("%s: %v:\n%s", what, err, out)
	}
}

// Every command that takes --json prints its result through the one writer:
// each runs here, successfully, and its output goes through the one decoder
// (the error object of each is TestJSONErrorEveryCommand's).
func TestJSONEveryCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "jsonout")
	outputs := map[string]string{}
	ok := func(name string, args ...string) string {
		t.Helper()
		out := c.ok(args...)
		outputs[name] = out
		return out
	}
	// first returns a long-running command's first line of output.
	first := func(name string, p *proc) {
		t.Helper()
		outputs[name] = p.line(t, `^\{`) + "\n"
		p.stop(t, syscall.SIGINT)
	}
	var obj map[string]json.RawMessage

	first("serve", startProc(t, cliEnv(), "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--json"))
	ok("config show", "config", "show", "--json")
	ok("config permissions", "config", "permissions", "--json")

	c.ok("init", "--blobs", "file://"+t.TempDir())
	ok("upgrade", "upgrade", "--json")
	a, b := t.TempDir(), t.TempDir()
	ha := []string{"--cache", a, "--host", "a"}
	hb := []string{"--cache", b, "--host", "b"}
	put(t, a, "p/shared", "v0")
	put(t, a, "data/t/m/d/1/raw", "raw")
	put(t, a, "p/<a>&b", "html in a name")
	ok("commit", append(ha, "commit", "--json")...)
	ok("sync", append(hb, "sync", "--lazy", "--json")...)
	ok("fetch", append(hb, "fetch", "--json", "data/t/m/d/1/raw")...)
	ok("status", append(hb, "status", "--json")...)
	ok("verify", append(hb, "verify", "--json")...)
	ok("hosts", "hosts", "--json")
	ok("log", "log", "--json")
	ok("consume status", "consume", "status", "--json")
	ok("snapshot", "snapshot", "--json")
	ok("replay", "replay", "--json", "--to", "1", "--into", t.TempDir())
	ok("rebuild", append(hb, "rebuild", "--json")...)
	ok("gc", "gc", "--dry-run", "--json")

	// A conflict on b, taken as the ledger's.
	put(t, a, "p/shared", "a1")
	c.ok(append(ha, "commit")...)
	put(t, b, "p/shared", "b1")
	c.run(append(hb, "sync")...)
	ok("resolve", append(hb, "resolve", "--theirs", "p/shared", "--json")...)

	tail := startProc(t, c.env, "tail", "--from", "1", "--json")
	watch := startProc(t, c.env, append(hb, "watch", "--json")...)
	watch.line(t, `^\{`) // the first sync
	put(t, a, "p/shared", "a2")
	c.ok(append(ha, "commit")...)
	first("tail", tail)
	first("watch", watch)
	first("ui", startProc(t, c.env, "ui", "--listen", "127.0.0.1:0", "--json"))

	// consume dead-letters prints one line per dead letter: made by a webhook
	// whose endpoint refuses everything.
	refuse := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })}
	hl := listenLoopback(t)
	go func() { _ = refuse.Serve(hl) }()
	t.Cleanup(func() { refuse.Close() })
	wp := startProc(t, append(c.env, "SYNCLEDGER_WEBHOOK_SECRET=s"), "consume", "webhook", "--url", "http://"+hl.Addr().String()+"/", "--start", "all")
	consumertest.Wait(t, 20*time.Second, "a dead letter", func() bool {
		outputs["consume dead-letters"] = c.ok("consume", "dead-letters", "--json")
		return outputs["consume dead-letters"] != ""
	})
	wp.stop(t, syscall.SIGTERM)

	// The swamp commands, on the fixtures of the swamp package.
	remote := "file://" + swampFixture(t, "doctor/remote")
	ok("swamp doctor", "swamp", "doctor", "--cache", swampFixture(t, "doctor/cache-healthy"), "--from", remote, "--json")
	ok("swamp import", "swamp", "import", "--from", "file://"+swampFixture(t, "v2"), "--json")
	repo := t.TempDir()
	put(t, repo, ".swamp.yaml", "datastore:\n  type: filesystem\n  path: "+filepath.Join(repo, "ds")+"\n")
	if err := os.MkdirAll(filepath.Join(repo, "ds"), 0o755); err != nil {
		t.Fatal(err)
	}
	ok("swamp setup", "swamp", "setup", "--repo", repo, "--skip-import", "--cache", t.TempDir(), "--json")

	// The mirror's commands, on two regions (regions_e2e_test.go).
	rc := newRegionsCLI(t, "jsonmirror")
	ok("mirror create", append([]string{"--read-nats", rc.r.Mirror.ClientURL(), "--nats", rc.r.Origin.ClientURL(), "--ledger", "jsonmirror"}, "mirror", "create", "--json")...)
	ok("mirror status", append([]string{"--read-nats", rc.r.Mirror.ClientURL(), "--nats", rc.r.Origin.ClientURL(), "--ledger", "jsonmirror"}, "mirror", "status", "--json")...)
	ok("mirror promote", "--nats", rc.r.Mirror.ClientURL(), "--ledger", "jsonmirror", "mirror", "promote", "--json") // last of the mirror's: it is an origin after

	// Last, as it breaks the first commit's chain for the commands above.
	decodeJSON(t, "log", strings.SplitAfter(outputs["log"], "\n")[0], &obj)
	ok("quarantine", "quarantine", string(obj["seq"]), "--reason", "bad", "--force", "--json")
	outputs["quarantine --list"] = c.ok("quarantine", "--list", "--json")
	// The ledger backed up, then put back over itself (its current state
	// kept aside first).
	bk := filepath.Join(t.TempDir(), "backup")
	ok("backup", "backup", bk, "--json")
	ok("restore", "restore", bk, "--replace", "--keep", filepath.Join(t.TempDir(), "kept"), "--json")

	for name, out := range outputs {
		for _, v := range jsonLines(t, name, out) {
			if err := json.Unmarshal(v, new(any)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	for _, name := range jsonCommands() {
		if _, ok := outputs[name]; !ok {
			t.Errorf("%s takes --json: run it here", name)
		}
	}
	// The writer does not escape HTML: a path reads as written.
	if !strings.Contains(outputs["commit"], `"p/<a>&b"`) {
		t.Errorf("commit --json escaped a path:\n%s", outputs["commit"])
	}
	if got := len(jsonLines(t, "quarantine --list", outputs["quarantine --list"])); got != 1 {
		t.Errorf("quarantine --list --json: %d lines, want one array", got)
	}
}

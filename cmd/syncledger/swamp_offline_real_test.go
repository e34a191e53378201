package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSwampRealOffline (issue 39, "offline, on purpose"): with the server
// down, the real swamp reads the cache and says it may be stale; a host
// without the opt-in refuses to run a model, naming the server; a host set
// up with --offline-ok runs it on its cache, saying so, exit 0, and status
// shows the run not pushed. The server back, another host runs the same
// model; the offline host's next command publishes its run past the other's,
// and both hosts hold both runs. Every extension message is as docs/swamp.md
// shows it.
func TestSwampRealOffline(t *testing.T) {
	w := newRealSwamp(t)
	a, b := w.repo("host-a", "--offline-ok"), w.repo("host-b")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	w.mustSwamp(b, "datastore", "sync")

	w.srv.Kill()
	// A read: the cache as it is, said to be possibly stale.
	out, code := w.run(b, "data", "query", `modelName == "vpc"`, "--json")
	t.Logf("b's read with the server down: exit %d\n%s", code, syncledgerLines(out))
	if code != 0 || !strings.Contains(out, "vpc") {
		t.Errorf("b's read with the server down: exit %d, want the cache's data\n%s", code, out)
	}
	matchesDocumented(t, out, "which may be stale.")
	// Without the opt-in: refused, naming the server, nothing run.
	out, code = w.run(b, "model", "method", "run", "vpc", "execute")
	t.Logf("b's run without the opt-in: exit %d\n%s", code, syncledgerLines(out))
	if code == 0 || !strings.Contains(out, "cannot reach NATS") || strings.Contains(out, "vpc-0abc123") {
		t.Errorf("b's run with the server down and no opt-in: exit %d, want a refusal naming the server and nothing run\n%s", code, out)
	}
	// With it: run on the cache, said, exit 0.
	out, code = w.run(a, "model", "method", "run", "vpc", "execute")
	t.Logf("a's run offline: exit %d\n%s", code, syncledgerLines(out))
	if code != 0 || !strings.Contains(out, "vpc-0abc123") {
		t.Fatalf("a's run with the opt-in and the server down: exit %d, want it run\n%s", code, out)
	}
	matchesDocumented(t, out, "swamp runs on this host's cache", "this command's changes stay in this host's cache")
	var st struct {
		cliStatus
		Offline     bool   `json:"offline"`
		Unreachable string `json:"unreachable"`
	}
	raw := w.sl(a, "status", "--json")
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("status --json offline: %v\n%s", err, raw)
	}
	if !st.Offline || st.Unreachable == "" || len(st.Dirty) == 0 {
		t.Fatalf("a's status offline: %s\nwant offline, why, and the run not pushed", raw)
	}
	if v := w.dataVersions(a, "vpc"); v["result"] != 2 {
		t.Fatalf("a's vpc versions offline: %v, want result 2 (its offline run)", v)
	}

	w.srv.Restart()
	w.mustSwamp(b, "model", "method", "run", "vpc", "execute") // b's run takes version 2 first
	out = w.mustSwamp(a, "model", "method", "run", "other", "execute")
	t.Logf("a's next command, the server back:\n%s", syncledgerLines(out))
	if !strings.Contains(out, "version 2 is now 3") {
		t.Errorf("a's next command does not say its offline run moved from version 2 to 3:\n%s", out)
	}
	w.synced(a, b)
	for _, r := range []string{a, b} {
		if v := w.dataVersions(r, "vpc"); v["result"] != 3 {
			t.Errorf("%s: vpc's versions %v, want result 3 (a's two runs and b's)", r, v)
		}
	}
}

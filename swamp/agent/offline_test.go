package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/projector/host"
)

// result is an answer's result as a map.
func result(t *testing.T, r Response, what string) map[string]any {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("%s: %+v", what, r.Error)
	}
	m, _ := r.Result.(map[string]any)
	return m
}

// TestAgentOffline: with the server unreachable, an agent without the
// opt-in refuses what needs the ledger, as always, and its close after a
// command that wrote nothing says the cache it read may be stale (its mark);
// with the opt-in swamp runs on the cache — a pull pulls nothing and says
// so, locks are this host's alone (two commands still take turns), a push
// publishes nothing and says so — and the next command that reaches the
// ledger publishes what it wrote, after another host's commit, through the
// usual rules (issue 39).
func TestAgentOffline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cache, other := t.TempDir(), t.TempDir()
	c := startAgent(t, e, cache, nil)
	write(t, cache, "data/t/m/a/1/raw", "online\n")
	result(t, c.call(map[string]any{"op": "pull"}), "pull")
	if r := result(t, c.call(map[string]any{"op": "push"}), "push"); r["files"].(float64) != 1 {
		t.Fatalf("online push: %+v", r)
	}

	e.down.Store(true)
	// Without the opt-in: refused, as today; a read-only command is told its read may be stale.
	plain := startAgent(t, e, cache, nil)
	if r := plain.call(map[string]any{"op": "pull"}); r.Error == nil || r.Error.Kind != "unreachable" {
		t.Fatalf("pull offline without the opt-in: %+v, want unreachable", r)
	}
	if r := plain.call(map[string]any{"op": "lock.acquire", "key": "k", "holder": map[string]any{"holder": "a@b", "hostname": "b", "pid": 1}, "maxWaitMs": 100}); r.Error == nil {
		t.Fatalf("lock offline without the opt-in: %+v, want refused", r)
	}
	reader := startAgent(t, e, cache, nil)
	if r := result(t, reader.call(map[string]any{"op": "close", "publish": true}), "close"); !strings.Contains(r["offline"].(string), "connection refused") || r["hwm"].(float64) != 1 {
		t.Fatalf("close of a read-only command offline: %+v, want offline and hwm 1", r)
	}

	// With the opt-in.
	off := serveAgent(t, Config{Offline: true, Ports: ports{e: e, cache: cache}})
	if r := result(t, off.call(map[string]any{"op": "pull"}), "offline pull"); r["offline"] == nil || r["files"].(float64) != 0 || r["hwm"].(float64) != 1 {
		t.Fatalf("offline pull: %+v", r)
	}
	lock := map[string]any{"op": "lock.acquire", "key": "data/t/m/.lock", "holder": map[string]any{"holder": "a@b", "hostname": "b", "pid": 1}, "maxWaitMs": 200}
	result(t, off.call(lock), "offline lock")
	second := serveAgent(t, Config{Offline: true, Ports: ports{e: e, cache: cache}})
	if r := second.call(lock); r.Error == nil || !strings.Contains(r.Error.Message, "another swamp command on this host") {
		t.Fatalf("a second command's lock offline: %+v, want it held on this host", r)
	}
	write(t, cache, "data/t/m/a/2/raw", "offline\n")
	off.notify(map[string]any{"op": "hint", "hints": []string{"data/t/m/a"}})
	if r := result(t, off.call(map[string]any{"op": "prepare"}), "offline prepare"); r["files"].(float64) != 0 {
		t.Fatalf("offline prepare: %+v", r)
	}
	if r := result(t, off.call(map[string]any{"op": "commit"}), "offline commit"); r["offline"] == nil || r["commit"] != nil {
		t.Fatalf("offline commit: %+v", r)
	}
	result(t, off.call(map[string]any{"op": "lock.release", "key": "data/t/m/.lock"}), "offline release")
	result(t, second.call(lock), "the lock once released")
	if r := result(t, off.call(map[string]any{"op": "close", "publish": true}), "offline close"); r["offline"] == nil {
		t.Fatalf("offline close: %+v", r)
	}
	if head, _ := e.log.LastSeq(t.Context()); head != 1 {
		t.Fatalf("head %d after the offline command, want 1: nothing published", head)
	}

	// Meanwhile another host publishes.
	e.down.Store(false)
	oh, err := host.Open(host.Config{Cache: other, Host: "other", Log: e.log, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oh.Sync(t.Context(), host.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	write(t, other, "data/t/n/b/1/raw", "other host\n")
	if _, err := oh.Commit(t.Context(), host.CommitOptions{Message: "other"}); err != nil {
		t.Fatal(err)
	}
	oh.Close()

	// The next command that reaches the ledger pulls, then publishes the offline run.
	next := startAgent(t, e, cache, nil)
	if r := result(t, next.call(map[string]any{"op": "pull"}), "pull back online"); r["offline"] != nil || r["files"].(float64) != 1 {
		t.Fatalf("pull back online: %+v", r)
	}
	if r := result(t, next.call(map[string]any{"op": "push"}), "push back online"); r["files"].(float64) != 1 {
		t.Fatalf("push back online: %+v, want the offline run", r)
	}
	if got, ok := readLedger(t, e, "data/t/m/a/2/raw"); !ok || got != "offline\n" {
		t.Fatalf("the offline run in the ledger: %q %v", got, ok)
	}
	if got, ok := readLedger(t, e, "data/t/n/b/1/raw"); !ok || got != "other host\n" {
		t.Fatalf("the other host's run in the ledger: %q %v", got, ok)
	}
}

// readLedger reads rel as the ledger has it, through a fresh cache.
func readLedger(t *testing.T, e *env, rel string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	h, err := host.Open(host.Config{Cache: dir, Host: "reader", Log: e.log, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Sync(t.Context(), host.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	return string(b), err == nil
}

package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/projector/host"
)

// TestAgentLockSeesLatestThroughMirror: an agent in region B reads the
// ledger from its mirror, whose link to the origin is stalled; another host
// commits a new run of a model at the origin. A pull without a lock is the
// mirror's word (the run is not there: the mirror really lags). Once the
// agent holds the model's lock, its pull asks the origin for its head (one
// request no mirror answers) and brings the run: a swamp command that holds
// a model's lock sees that model's latest commit (issue 40; swamp-club#3193
// through a mirror).
func TestAgentLockSeesLatestThroughMirror(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	r := natsjstest.RunRegions(t)
	info, _ := e.log.Info(ctx)
	nc := natsjstest.Connect(t, r.Origin.ClientURL())
	origin, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "agentregion", Blobs: info.Blobs})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: r.Origin.ClientURL()}, Read: natsjs.Endpoint{URL: r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateMirror(ctx, "agentregion", 1); err != nil {
		t.Fatal(err)
	}
	c, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: r.FarURL()}, Read: natsjs.Endpoint{URL: r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bLog, err := c.Ledger("agentregion").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Host a, at the origin, commits runs of the model.
	a, err := host.Open(host.Config{Cache: t.TempDir(), Host: "host-a", Log: origin, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const rel = "data/command/shell/vpc/log/1/raw"
	run := func(content string) ledger.Seq {
		t.Helper()
		p := filepath.Join(a.Dir().Root(), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := a.Commit(ctx, host.CommitOptions{Message: content})
		if err != nil {
			t.Fatal(err)
		}
		return res.Seqs[len(res.Seqs)-1]
	}
	first := run("first run")
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, ok, err := bLog.MirrorHead(ctx)
		if err == nil && ok && h.Seq >= first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror did not reach seq %d: %+v, %v, %v", first, h, ok, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	cache := t.TempDir()
	b := serveAgent(t, Config{Host: "host-b", Ports: ports{e: e, cache: cache, log: bLog}})
	if r := b.call(map[string]any{"op": "hello", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	read := func() string {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(cache, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if r := b.call(map[string]any{"op": "pull"}); r.Error != nil || read() != "first run" {
		t.Fatalf("b's first pull: %+v, %q", r, read())
	}

	// The link between the regions stalls; a's next run reaches the origin
	// only.
	r.Link.Stall(true, true)
	defer r.Link.Resume()
	second := run("second run")
	if r := b.call(map[string]any{"op": "pull"}); r.Error != nil || read() != "first run" {
		t.Fatalf("b's pull without a lock behind the stalled mirror: %+v, %q (the mirror's word was expected: it lags)", r, read())
	}

	const key = "data/command/shell/vpc/.lock"
	h := map[string]any{"holder": "b@laptop", "hostname": "b-laptop", "pid": 42, "nonce": "b"}
	if r := b.call(map[string]any{"op": "lock.acquire", "key": key, "holder": h, "ttlMs": 30000}); r.Error != nil {
		t.Fatalf("acquire: %+v", r.Error)
	}
	r2 := b.call(map[string]any{"op": "pull"})
	if r2.Error != nil {
		t.Fatalf("b's pull under the lock: %+v", r2.Error)
	}
	if got := read(); got != "second run" {
		t.Fatalf("b holds the model's lock but its pull left %q, want the origin's latest run (seq %d)", got, second)
	}
	// The lock's fence record follows the run at the origin: the pull's
	// HWM is past both.
	if hwm := r2.Result.(map[string]any)["hwm"].(float64); ledger.Seq(hwm) <= second {
		t.Fatalf("b's pull under the lock: hwm %v, want past %d", hwm, second)
	}
}

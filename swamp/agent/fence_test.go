package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/memledger"
	"github.com/syncledger/syncledger/projector/host"
)

// suspendedKV is a swamp bucket this host cannot reach while suspended: a
// stopped laptop renews nothing.
type suspendedKV struct {
	ledger.KV
	suspended atomic.Bool
}

func (k *suspendedKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if k.suspended.Load() {
		return 0, ledger.ErrUnreachable
	}
	return k.KV.Update(ctx, key, value, last)
}

// logFencer stores fence records of host on e's log, on e's clock, as an
// agent does.
func logFencer(e *env, hostID string) Fencer {
	return func(ctx context.Context, key string, info LockInfo) (ledger.Fence, error) {
		f, _, err := takeFence(ctx, e.log, hostID, e.clock.Now(), key, info)
		return f, err
	}
}

// Every lock taken, new or over an expired holder, has its fence record in
// the ledger before Acquire returns; Fences lists the fences of the locks
// held; a fence record that cannot be stored gives the lock back.
func TestLockFences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	a := NewLocks(ctx, e.kv, e.clock, logFencer(e, "host-a"))
	b := NewLocks(ctx, e.kv, e.clock, logFencer(e, "host-b"))
	defer a.Close()
	defer b.Close()
	const model, global, ttl = "data/command/shell/vpc/.lock", ".datastore.lock", 3 * time.Second
	for _, key := range []string{model, global} {
		if err := a.Acquire(ctx, key, holder("a"), ttl, 0, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	fs := a.Fences()
	if len(fs) != 2 || fs[0].Lock != global || fs[1].Lock != model || fs[0].Seq != 2 || fs[1].Seq != 1 {
		t.Fatalf("a's fences %v, want the global lock's (seq 2) and the model's (seq 1)", fs)
	}
	var recs []ledger.Record
	if err := e.log.Read(ctx, 1, 0, func(r ledger.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if f := recs[0].Skip.Fence; f == nil || f.Lock != model || f.Host != "host-a" || f.Holder != "a (pid 1)" || !f.At.Equal(e.clock.Now()) {
		t.Fatalf("the model lock's fence record: %+v", recs[0].Skip)
	}
	// a stops renewing (its renewals stop with its Locks); past the TTL b
	// takes the model lock over: its own fence record.
	a.Close()
	e.clock.Advance(ttl + time.Second)
	if err := b.Acquire(ctx, model, holder("b"), ttl, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	if fs := b.Fences(); len(fs) != 1 || fs[0] != (ledger.Fence{Lock: model, Seq: 3}) {
		t.Fatalf("b's fences after the takeover: %v, want the model lock's at seq 3", fs)
	}
	if err := b.Release(ctx, model); err != nil {
		t.Fatal(err)
	}
	if fs := b.Fences(); len(fs) != 0 {
		t.Fatalf("fences after the release: %v", fs)
	}

	// The ledger refuses the fence record: the lock is given back at once.
	refused := errors.New("refused")
	c := NewLocks(ctx, e.kv, e.clock, func(context.Context, string, LockInfo) (ledger.Fence, error) { return ledger.Fence{}, refused })
	defer c.Close()
	if err := c.Acquire(ctx, model, holder("c"), ttl, 0, time.Second); !errors.Is(err, refused) || !strings.Contains(err.Error(), "fence record") {
		t.Fatalf("acquire whose fence record is refused: %v", err)
	}
	if info, err := c.Inspect(ctx, model); info != nil || err != nil {
		t.Fatalf("the lock after its fence record was refused: %+v, %v; want free", info, err)
	}
}

// TestAgentLockLost is issue 39's suspended laptop on the agent: a holds a
// model's lock and runs the model; it stops (no renewal reaches the bucket)
// past the lock's TTL; b takes the lock over and publishes; a resumes and
// pushes. a's push is refused — kind "lock-lost", naming the lock and b —
// nothing of a's run is published (neither by the push nor at a's end), and
// a's files stay in its cache, uncommitted; a's next command publishes them
// after b's.
func TestAgentLockLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	cache := t.TempDir()
	kv := &suspendedKV{KV: e.kv}
	a := serveAgent(t, Config{Host: "host-a", Ports: ports{e: e, cache: cache, kv: kv}})
	if r := a.call(map[string]any{"op": "hello", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	const key, ttl = "data/command/shell/vpc/.lock", 3 * time.Second
	acquire := func(c *agentClient, who string) {
		t.Helper()
		h := map[string]any{"holder": who + "@laptop", "hostname": who + "-laptop", "pid": 42, "nonce": who}
		if r := c.call(map[string]any{"op": "lock.acquire", "key": key, "holder": h, "ttlMs": ttl.Milliseconds()}); r.Error != nil {
			t.Fatalf("%s: acquire: %+v", who, r.Error)
		}
	}
	acquire(a, "a")
	if r := a.call(map[string]any{"op": "pull"}); r.Error != nil {
		t.Fatalf("a: pull: %+v", r.Error)
	}
	// a's run writes its data (swamp hints the directory first).
	a.notify(map[string]any{"op": "hint", "hints": []string{"data/command/shell/vpc/result"}})
	run := filepath.Join(cache, "data", "command", "shell", "vpc", "result", "1", "raw")
	if err := os.MkdirAll(filepath.Dir(run), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(run, []byte("a's apply"), 0o644); err != nil {
		t.Fatal(err)
	}

	// a is suspended past the TTL; b's agent-side locks take the lock over
	// and b publishes a run of the same model under it.
	kv.suspended.Store(true)
	e.clock.Advance(ttl + time.Second)
	b := NewLocks(ctx, e.kv, e.clock, logFencer(e, "host-b"))
	defer b.Close()
	if err := b.Acquire(ctx, key, LockInfo{Holder: "bob@desk", Hostname: "desk", PID: 7}, ttl, 0, time.Second); err != nil {
		t.Fatalf("b takes the expired lock: %v", err)
	}
	bh, err := host.Open(host.Config{Cache: t.TempDir(), Host: "host-b", Log: e.log, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	bf := filepath.Join(bh.Dir().Root(), "data", "command", "shell", "vpc", "log", "1", "raw")
	if err := os.MkdirAll(filepath.Dir(bf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bf, []byte("b's apply"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bh.Commit(ctx, host.CommitOptions{Fences: b.Fences()}); err != nil {
		t.Fatalf("b's commit under the lock: %v", err)
	}
	head, _ := e.log.LastSeq(ctx)

	// a resumes and pushes its run: refused where it is written.
	kv.suspended.Store(false)
	r := a.call(map[string]any{"op": "push"})
	if r.Error == nil || r.Error.Kind != "lock-lost" {
		t.Fatalf("a's push under the lost lock: %+v, want a lock-lost failure", r)
	}
	for _, want := range []string{key, "bob@desk (pid 7) on host host-b", "lock lost", "nothing of this command was published"} {
		if !strings.Contains(r.Error.Message, want) {
			t.Errorf("a's failure %q does not say %q", r.Error.Message, want)
		}
	}
	t.Logf("a's push: %s", r.Error.Message)
	if h, _ := e.log.LastSeq(ctx); h != head {
		t.Fatalf("a's refused push moved the head from %d to %d", head, h)
	}
	// The agent's end publishes nothing of it either (no close came).
	a.in.Close()
	if err := <-a.done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	a.done <- nil
	if h, _ := e.log.LastSeq(ctx); h != head {
		t.Fatalf("a's end published what swamp wrote under the lost lock: head %d, want %d", h, head)
	}
	ah, err := host.Open(host.Config{Cache: cache, Host: "host-a", Log: e.log, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ah.Status(ctx)
	ah.Close()
	if err != nil || !slices.Contains(st.Dirty, "data/command/shell/vpc/result/1/raw") {
		t.Fatalf("a's cache after the refused push: %+v, %v; want its run kept, uncommitted", st.Dirty, err)
	}

	// a's next command, once b released the lock: its pull takes b's run, its
	// push publishes a's (kept), under a lock it holds.
	if err := b.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	a2 := serveAgent(t, Config{Host: "host-a", Ports: ports{e: e, cache: cache}})
	if r := a2.call(map[string]any{"op": "hello", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	acquire(a2, "a")
	if r := a2.call(map[string]any{"op": "pull"}); r.Error != nil {
		t.Fatalf("a's next pull: %+v", r.Error)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "data", "command", "shell", "vpc", "log", "1", "raw")); err != nil || string(b) != "b's apply" {
		t.Fatalf("a's next pull did not bring b's run: %q, %v", b, err)
	}
	if r := a2.call(map[string]any{"op": "push"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 {
		t.Fatalf("a's next push: %+v, want a's run published", r)
	}
}

// On a ledger of log format 1 (made by a release before fences, read by
// every release) locks are taken unfenced, and commits under them publish as
// before: nothing an older reader cannot read is stored.
func TestLocksUnfencedOnFormatOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old, err := memledger.New(ledger.Info{Name: "old", Format: 1, Blobs: "file:///unused"}, e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	e.log = old
	cache := t.TempDir()
	c := serveAgent(t, Config{Host: "host-a", Ports: ports{e: e, cache: cache}})
	if r := c.call(map[string]any{"op": "hello", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	h := map[string]any{"holder": "a@laptop", "hostname": "laptop", "pid": 1, "nonce": "a"}
	if r := c.call(map[string]any{"op": "lock.acquire", "key": "data/t/m/.lock", "holder": h, "ttlMs": 3000}); r.Error != nil {
		t.Fatalf("acquire on a format-1 ledger: %+v", r.Error)
	}
	p := filepath.Join(cache, "data", "t", "m", "result", "latest")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil {
		t.Fatalf("push under an unfenced lock: %+v", r.Error)
	}
	var recs []ledger.Record
	if err := old.Read(t.Context(), 1, 0, func(r ledger.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Skip != nil {
		t.Fatalf("the format-1 ledger holds %d records (%+v), want the commit's event alone", len(recs), recs)
	}
}

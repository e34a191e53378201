package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger/jetstream/jstest"
)

func testBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	_, nc := jstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "locks", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func holder(name string) LockInfo {
	return LockInfo{Holder: name, Hostname: name + "-host", PID: 1, Nonce: "nonce-" + name}
}

// Two holders contend for one lock: the second waits, is told who holds it
// when its wait runs out, and gets it once the first releases.
func TestLockContention(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := t.Context()
	a, b := NewLocks(kv), NewLocks(kv)
	defer a.Close()
	defer b.Close()
	// b polls every retry: about 15 refused attempts in its first wait and 10
	// while it waits for a's release.
	const key, retry, wait = "data/command/shell/vpc/.lock", 10 * time.Millisecond, 150 * time.Millisecond
	if err := a.Acquire(ctx, key, holder("a"), 10*time.Second, retry, time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := b.Acquire(ctx, key, holder("b"), 10*time.Second, retry, wait)
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), "held by a") {
		t.Fatalf("second acquire: %v, want a timeout naming holder a", err)
	}
	if waited := time.Since(start); waited < wait-retry {
		t.Fatalf("second acquire gave up after %v, before its %v wait", waited, wait)
	}
	info, err := b.Inspect(ctx, key)
	if err != nil || info == nil || info.Holder != "a" || info.Nonce != "nonce-a" || info.TTLMs != 10000 {
		t.Fatalf("inspect = %+v, %v; want holder a", info, err)
	}
	// b waits while a holds it, and gets it when a releases.
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, key, holder("b"), 10*time.Second, retry, 30*time.Second) }()
	time.Sleep(10 * retry)
	select {
	case err := <-got:
		t.Fatalf("b acquired while a held the lock: %v", err)
	default:
	}
	if err := a.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("b after a released: %v", err)
	}
	if info, _ := a.Inspect(ctx, key); info == nil || info.Holder != "b" {
		t.Fatalf("inspect after hand-over = %+v, want b", info)
	}
}

// A holder that renews keeps its lock past the TTL; one that stops renewing
// (killed) loses it TTL after its last renewal, and once another holder has
// taken it over, the old one can neither renew nor release it (fencing by
// revision). The two cases run at once, on two locks of one holder.
//
// It races real time (the renewals against the TTL), so it is not parallel: it
// runs before the parallel tests start, alone in this process. Beside eight
// others (the mirror's and the agent's take all the CPU they get) a loaded
// machine delayed its renewals past the TTL, even at three times this one.
func TestLockExpiryAndFencing(t *testing.T) {
	kv := testBucket(t)
	ctx := t.Context()
	a, b := NewLocks(kv), NewLocks(kv)
	defer a.Close()
	defer b.Close()
	// a renews every ttl/3.
	const alive, dies, ttl = ".datastore.lock", "data/command/shell/vpc/.lock", 600 * time.Millisecond
	for _, key := range []string{alive, dies} {
		if err := a.Acquire(ctx, key, holder("a"), ttl, 20*time.Millisecond, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Renewal keeps alive held well past the TTL while a runs: at every look,
	// each half TTL for two TTLs.
	renewing := make(chan error, 1)
	go func() {
		for i := 1; i <= 4; i++ {
			time.Sleep(ttl / 2)
			if info, err := b.Inspect(ctx, alive); err != nil || info == nil || info.Holder != "a" {
				renewing <- fmt.Errorf("a renewing, %v after acquiring: inspect = %+v, %v; want a", time.Duration(i)*ttl/2, info, err)
				return
			}
		}
		renewing <- nil
	}()

	// a renews dies at least once, then "dies": its renewal stops, nothing is
	// released.
	first, err := kv.Get(ctx, kvKey(dies))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if e, err := kv.Get(ctx, kvKey(dies)); err == nil && e.Revision() > first.Revision() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a did not renew its lock within 10 s")
		}
	}
	a.mu.Lock()
	ha := a.held[dies]
	a.mu.Unlock()
	ha.halt()
	last, err := kv.Get(ctx, kvKey(dies)) // a's last renewal
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, dies, holder("b"), ttl, 20*time.Millisecond, 10*time.Second); err != nil {
		t.Fatalf("b after a's TTL: %v", err)
	}
	if live := time.Since(last.Created()); live < ttl {
		t.Fatalf("b took a live lock %v after a's last renewal (ttl %v)", live, ttl)
	}
	if ha.renewOnce(kvKey(dies)) {
		t.Fatal("a renewed a lock b took over")
	}
	if err := a.Release(ctx, dies); err != nil {
		t.Fatal(err)
	}
	if info, _ := b.Inspect(ctx, dies); info == nil || info.Holder != "b" {
		t.Fatalf("after a's release: inspect = %+v, want b still holding", info)
	}
	if err := <-renewing; err != nil {
		t.Fatal(err)
	}
}

// forceRelease deletes the lock only with its holder's nonce.
func TestLockForceReleaseNonce(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := t.Context()
	a, b := NewLocks(kv), NewLocks(kv)
	defer a.Close()
	const key = ".locks/ci.lock"
	if err := a.Acquire(ctx, key, holder("a"), 10*time.Second, 20*time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.ForceRelease(ctx, key, "not-the-nonce"); ok || err != nil {
		t.Fatalf("force-release with a wrong nonce = %v, %v; want refused", ok, err)
	}
	if ok, err := b.ForceRelease(ctx, key, ""); ok || err != nil {
		t.Fatalf("force-release with no nonce = %v, %v; want refused", ok, err)
	}
	if info, _ := b.Inspect(ctx, key); info == nil {
		t.Fatal("lock gone after refused force-releases")
	}
	if ok, err := b.ForceRelease(ctx, key, "nonce-a"); !ok || err != nil {
		t.Fatalf("force-release with the nonce = %v, %v", ok, err)
	}
	if info, _ := b.Inspect(ctx, key); info != nil {
		t.Fatalf("inspect after force-release = %+v", info)
	}
	// a's next renewal finds the lock gone and stops; its release is a no-op.
	a.mu.Lock()
	ha := a.held[key]
	a.mu.Unlock()
	if ha.renewOnce(kvKey(key)) {
		t.Fatal("a renewed a force-released lock")
	}
	if err := b.Acquire(ctx, key, holder("b"), 10*time.Second, 20*time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	if info, _ := b.Inspect(ctx, key); info == nil || info.Holder != "b" {
		t.Fatalf("a's release removed b's lock: %+v", info)
	}
	b.Close()
}

// The control-plane store and namespace registrations on the bucket.
func TestControlPlane(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := context.Background()
	c := Control{kv}
	if v, err := c.Get(ctx, "vault/a"); v != nil || err != nil {
		t.Fatalf("get missing = %q, %v", v, err)
	}
	if err := c.Put(ctx, "vault/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.PutIfAbsent(ctx, "vault/a", []byte("2")); ok {
		t.Fatal("putIfAbsent overwrote")
	}
	if ok, _ := c.PutIfAbsent(ctx, "tokens/x", []byte("3")); !ok {
		t.Fatal("putIfAbsent on a new key refused")
	}
	if v, _ := c.Get(ctx, "vault/a"); string(v) != "1" {
		t.Fatalf("get = %q", v)
	}
	if l, _ := c.List(ctx, "vault/"); len(l) != 1 || l[0] != "vault/a" {
		t.Fatalf("list vault/ = %q", l)
	}
	if err := c.Delete(ctx, "vault/a"); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.List(ctx, ""); len(l) != 1 || l[0] != "tokens/x" {
		t.Fatalf("list after delete = %q", l)
	}
	if err := RegisterNamespace(ctx, kv, "ci", "repo-1"); err != nil {
		t.Fatal(err)
	}
	if err := RegisterNamespace(ctx, kv, "ci", "repo-1"); err != nil {
		t.Fatalf("re-registering by its owner: %v", err)
	}
	if err := RegisterNamespace(ctx, kv, "ci", "repo-2"); err == nil {
		t.Fatal("another repo registered an owned namespace")
	}
	if ns, _ := ListNamespaces(ctx, kv); len(ns) != 1 || ns[0] != "ci" {
		t.Fatalf("namespaces = %q", ns)
	}
}

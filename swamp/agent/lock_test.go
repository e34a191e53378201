package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
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

// fakeClock is a Clock the test moves: Now stands still until Set; the
// channels of After fire at Fire, whatever their duration.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, ch)
	return ch
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Waiting returns once n Afters wait.
func (c *fakeClock) Waiting(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		w := len(c.waiters)
		c.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waits on the clock, want %d", w, n)
		}
	}
}

// Fire fires every After waiting, once n of them wait.
func (c *fakeClock) Fire(t *testing.T, n int) {
	t.Helper()
	c.Waiting(t, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.waiters {
		ch <- c.now
	}
	c.waiters = nil
}

// revisionAfter waits until key's entry is newer than rev and returns it.
func revisionAfter(t *testing.T, kv jetstream.KeyValue, key string, rev uint64) jetstream.KeyValueEntry {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if e, err := kv.Get(t.Context(), kvKey(key)); err == nil && e.Revision() > rev {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %s not renewed past revision %d", key, rev)
		}
	}
}

// Two holders contend for one lock: the second waits, is told who holds it
// and since when once its wait runs out, gets it once the first releases, and
// gives up when its context ends.
func TestLockContention(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := t.Context()
	ca, cb := newFakeClock(), newFakeClock()
	a, b := NewLocks(kv, ca), NewLocks(kv, cb)
	defer a.Close()
	defer b.Close()
	const key, retry, ttl = "data/command/shell/vpc/.lock", 100 * time.Millisecond, 10 * time.Second
	if err := a.Acquire(ctx, key, holder("a"), ttl, retry, time.Second); err != nil {
		t.Fatal(err)
	}
	since := ca.Now().UTC().Format(time.RFC3339Nano)
	err := b.Acquire(ctx, key, holder("b"), ttl, retry, retry)
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), "held by a (host a-host, pid 1) since "+since) {
		t.Fatalf("second acquire: %v, want a timeout naming holder a, its host, pid and since when", err)
	}
	info, err := b.Inspect(ctx, key)
	if err != nil || info == nil || info.Holder != "a" || info.Nonce != "nonce-a" || info.TTLMs != 10000 || info.HeldSince != since {
		t.Fatalf("inspect = %+v, %v; want holder a, since %s", info, err, since)
	}
	// b waits while a holds it (a's renewal keeps HeldSince), and gets it at
	// its first look after a released.
	ca.Fire(t, 1) // a's renewal
	revisionAfter(t, kv, key, 1)
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, key, holder("b"), ttl, retry, time.Hour) }()
	cb.Fire(t, 1)
	cb.Fire(t, 1)
	select {
	case err := <-got:
		t.Fatalf("b acquired while a held the lock: %v", err)
	default:
	}
	if info, _ := b.Inspect(ctx, key); info == nil || info.HeldSince != since {
		t.Fatalf("inspect after a's renewal = %+v, want since %s", info, since)
	}
	if err := a.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	cb.Fire(t, 1)
	if err := <-got; err != nil {
		t.Fatalf("b after a released: %v", err)
	}
	if info, _ := a.Inspect(ctx, key); info == nil || info.Holder != "b" {
		t.Fatalf("inspect after hand-over = %+v, want b", info)
	}
	// a waits for b, and stops waiting when its context ends.
	actx, cancel := context.WithCancel(ctx)
	go func() { got <- a.Acquire(actx, key, holder("a"), ttl, retry, time.Hour) }()
	ca.Waiting(t, 1)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's wait after its context ended: %v", err)
	}
}

// A holder that renews keeps its lock past the TTL; one that stops renewing
// (killed) loses it TTL after its last renewal, and once another holder has
// taken it over, the old one can neither renew nor release it (fencing by
// revision). The two cases run at once, on two locks of one holder; expiry
// is judged by b's clock against the server's time of each lock's last write.
func TestLockExpiryAndFencing(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := t.Context()
	ca, cb := newFakeClock(), newFakeClock()
	a, b := NewLocks(kv, ca), NewLocks(kv, cb)
	defer a.Close()
	defer b.Close()
	const alive, dies, ttl = ".datastore.lock", "data/command/shell/vpc/.lock", 10 * time.Second
	for _, key := range []string{alive, dies} {
		if err := a.Acquire(ctx, key, holder("a"), ttl, time.Millisecond, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// a renews both, then "dies" for one: its renewal stops, nothing is
	// released; it renews the other once more.
	ca.Fire(t, 2)
	revisionAfter(t, kv, alive, 2)
	last := revisionAfter(t, kv, dies, 2) // a's last renewal of dies
	a.mu.Lock()
	ha := a.held[dies]
	a.mu.Unlock()
	ha.halt()
	ca.Fire(t, 1)
	renewed := revisionAfter(t, kv, alive, max(last.Revision(), 3))
	gap := renewed.Created().Sub(last.Created())
	if gap <= 0 {
		t.Fatalf("alive renewed at %v, not after dies' last renewal at %v", renewed.Created(), last.Created())
	}
	// Just short of the TTL after dies' last renewal, b cannot take it.
	cb.Set(last.Created().Add(ttl - gap/2))
	if err := b.Acquire(ctx, dies, holder("b"), ttl, time.Millisecond, 0); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("b before a's TTL ran out: %v, want a timeout", err)
	}
	// Past it, b takes dies, but not alive (renewed since).
	cb.Set(last.Created().Add(ttl + gap/2))
	if err := b.Acquire(ctx, alive, holder("b"), ttl, time.Millisecond, 0); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("b took a renewed lock: %v", err)
	}
	if err := b.Acquire(ctx, dies, holder("b"), ttl, time.Millisecond, 0); err != nil {
		t.Fatalf("b after a's TTL: %v", err)
	}
	if ha.renewOnce(ctx, kvKey(dies)) {
		t.Fatal("a renewed a lock b took over")
	}
	if err := a.Release(ctx, dies); err != nil {
		t.Fatal(err)
	}
	c := NewLocks(kv, nil)
	if info, _ := c.Inspect(ctx, dies); info == nil || info.Holder != "b" {
		t.Fatalf("after a's release: inspect = %+v, want b still holding", info)
	}
	if info, _ := c.Inspect(ctx, alive); info == nil || info.Holder != "a" {
		t.Fatalf("alive: inspect = %+v, want a", info)
	}
}

// ReleaseAll gives back every lock held, and only those.
func TestLockReleaseAll(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := t.Context()
	a, b := NewLocks(kv, nil), NewLocks(kv, nil)
	defer b.Close()
	for _, key := range []string{".datastore.lock", "data/t/m/.lock"} {
		if err := a.Acquire(ctx, key, holder("a"), time.Minute, time.Millisecond, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Acquire(ctx, "data/t/n/.lock", holder("b"), time.Minute, time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{".datastore.lock": "", "data/t/m/.lock": "", "data/t/n/.lock": "b"} {
		info, err := b.Inspect(ctx, key)
		if err != nil || (info == nil) != (want == "") || info != nil && info.Holder != want {
			t.Errorf("%s after a's ReleaseAll: %+v, %v; want holder %q", key, info, err, want)
		}
	}
}

// forceRelease deletes the lock only with its holder's nonce.
func TestLockForceReleaseNonce(t *testing.T) {
	t.Parallel()
	kv := testBucket(t)
	ctx := t.Context()
	a, b := NewLocks(kv, nil), NewLocks(kv, nil)
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
	if ha.renewOnce(ctx, kvKey(key)) {
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

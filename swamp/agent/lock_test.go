package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// testBucket is a swamp bucket on clock, the holders' clock too.
func testBucket() (*memledger.KV, *fakeClock) {
	c := newFakeClock()
	return memledger.NewKV(c.Now), c
}

func holder(name string) LockInfo {
	return LockInfo{Holder: name, Hostname: name + "-host", PID: 1, Nonce: "nonce-" + name}
}

func revision(t *testing.T, kv ledger.KV, key string) ledger.KVEntry {
	t.Helper()
	e, err := kv.Get(t.Context(), kvKey(key))
	if err != nil {
		t.Fatalf("lock %s: %v", key, err)
	}
	return e
}

// Two holders contend for one lock: the second waits, is told who holds it
// and since when once its wait runs out, gets it once the first releases, and
// gives up when its context ends.
func TestLockContention(t *testing.T) {
	t.Parallel()
	kv, clock := testBucket()
	ctx := t.Context()
	a, b := NewLocks(ctx, kv, clock, nil), NewLocks(ctx, kv, clock, nil)
	defer a.Close()
	defer b.Close()
	const key, retry, ttl = "data/command/shell/vpc/.lock", 100 * time.Millisecond, 9 * time.Second
	if err := a.Acquire(ctx, key, holder("a"), ttl, retry, time.Second); err != nil {
		t.Fatal(err)
	}
	t0 := clock.Now()
	since := t0.Format(time.RFC3339Nano)
	err := b.Acquire(ctx, key, holder("b"), ttl, retry, retry)
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), "held by a (host a-host, pid 1) since "+since) {
		t.Fatalf("second acquire: %v, want a timeout naming holder a, its host, pid and since when", err)
	}
	info, err := b.Inspect(ctx, key)
	if err != nil || info == nil || info.Holder != "a" || info.Nonce != "nonce-a" || info.TTLMs != 9000 || info.HeldSince != since {
		t.Fatalf("inspect = %+v, %v; want holder a, since %s", info, err, since)
	}
	// a renews every ttl/3, keeping HeldSince.
	clock.Waiting(t, t0.Add(ttl/3), 1)
	rev := revision(t, kv, key).Revision
	clock.Advance(ttl / 3)
	clock.Waiting(t, t0.Add(2*ttl/3), 1)
	if e := revision(t, kv, key); e.Revision <= rev || !e.Created.Equal(t0.Add(ttl/3)) {
		t.Fatalf("after a's renewal period the lock is %+v, want renewed at %v", e, t0.Add(ttl/3))
	}
	// b waits while a holds it, trying every retry, and gets it at its first
	// try after a released.
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, key, holder("b"), ttl, retry, time.Hour) }()
	for i := range 3 {
		next := clock.Now().Add(retry)
		clock.Waiting(t, next, 1)
		select {
		case err := <-got:
			t.Fatalf("b acquired while a held the lock (try %d): %v", i, err)
		default:
		}
		clock.Advance(retry)
	}
	if info, _ := b.Inspect(ctx, key); info == nil || info.HeldSince != since {
		t.Fatalf("inspect after a's renewal = %+v, want since %s", info, since)
	}
	clock.Waiting(t, clock.Now().Add(retry), 1)
	if err := a.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	clock.Advance(retry)
	if err := <-got; err != nil {
		t.Fatalf("b after a released: %v", err)
	}
	if info, _ := a.Inspect(ctx, key); info == nil || info.Holder != "b" {
		t.Fatalf("inspect after hand-over = %+v, want b", info)
	}
	// a waits for b, and stops waiting when its context ends.
	actx, cancel := context.WithCancel(ctx)
	go func() { got <- a.Acquire(actx, key, holder("a"), ttl, retry, time.Hour) }()
	clock.Waiting(t, clock.Now().Add(retry), 1)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's wait after its context ended: %v", err)
	}
}

// A holder that renews keeps its lock past the TTL; one that stops renewing
// (killed) loses it just after TTL since its last renewal, not before, and
// once another holder has taken it over, the old one can neither renew nor
// release it (fencing by revision). The two cases run at once, on two locks
// of one holder.
func TestLockExpiryAndFencing(t *testing.T) {
	t.Parallel()
	kv, clock := testBucket()
	ctx := t.Context()
	a, b := NewLocks(ctx, kv, clock, nil), NewLocks(ctx, kv, clock, nil)
	defer a.Close()
	defer b.Close()
	const alive, dies, ttl = ".datastore.lock", "data/command/shell/vpc/.lock", 9 * time.Second
	for _, key := range []string{alive, dies} {
		if err := a.Acquire(ctx, key, holder("a"), ttl, time.Millisecond, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	period := func() {
		t.Helper()
		clock.Waiting(t, clock.Now().Add(ttl/3), 1)
		clock.Advance(ttl / 3)
	}
	// a renews both, then "dies" for one: its renewal stops, nothing is
	// released; it goes on renewing the other.
	clock.Waiting(t, clock.Now().Add(ttl/3), 2)
	clock.Advance(ttl / 3)
	a.mu.Lock()
	ha := a.held[dies]
	a.mu.Unlock()
	clock.Waiting(t, clock.Now().Add(ttl/3), 2)
	ha.halt()
	last := revision(t, kv, dies) // a's last renewal of dies
	if !last.Created.Equal(clock.Now()) {
		t.Fatalf("dies last written at %v, want renewed at %v", last.Created, clock.Now())
	}
	for range 3 {
		period()
	}
	// At exactly the TTL after dies' last renewal, b cannot take it.
	if now := clock.Now(); !now.Equal(last.Created.Add(ttl)) {
		t.Fatalf("clock at %v, want %v", now, last.Created.Add(ttl))
	}
	if err := b.Acquire(ctx, dies, holder("b"), ttl, time.Millisecond, 0); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("b at a's TTL: %v, want a timeout", err)
	}
	// Past it, b takes dies, but not alive (renewed since).
	clock.Waiting(t, clock.Now().Add(ttl/3), 1) // alive's renewal done
	clock.Advance(time.Millisecond)
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
	c := NewLocks(ctx, kv, clock, nil)
	if info, _ := c.Inspect(ctx, dies); info == nil || info.Holder != "b" {
		t.Fatalf("after a's release: inspect = %+v, want b still holding", info)
	}
	if info, _ := c.Inspect(ctx, alive); info == nil || info.Holder != "a" {
		t.Fatalf("alive: inspect = %+v, want a", info)
	}
}

// The renewals run under the Locks' context: once it ends (the agent's end)
// nothing renews, and the lock expires TTL after its last renewal.
func TestLockRenewalsEndWithTheirContext(t *testing.T) {
	t.Parallel()
	kv, clock := testBucket()
	ctx := t.Context()
	life, end := context.WithCancel(ctx)
	a, b := NewLocks(life, kv, clock, nil), NewLocks(ctx, kv, clock, nil)
	defer b.Close()
	const key, ttl = ".datastore.lock", 9 * time.Second
	if err := a.Acquire(ctx, key, holder("a"), ttl, time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	clock.Waiting(t, clock.Now().Add(ttl/3), 1)
	end()
	a.mu.Lock()
	done := a.held[key].done
	a.mu.Unlock()
	<-done // the renewals stopped
	rev := revision(t, kv, key).Revision
	clock.Advance(ttl)
	if e := revision(t, kv, key); e.Revision != rev {
		t.Fatalf("renewed after the locks' context ended: %+v", e)
	}
	clock.Advance(time.Millisecond)
	if err := b.Acquire(ctx, key, holder("b"), ttl, time.Millisecond, 0); err != nil {
		t.Fatalf("b after a's TTL: %v", err)
	}
}

// ReleaseAll gives back every lock held, and only those.
func TestLockReleaseAll(t *testing.T) {
	t.Parallel()
	kv, clock := testBucket()
	ctx := t.Context()
	a, b := NewLocks(ctx, kv, clock, nil), NewLocks(ctx, kv, clock, nil)
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
	kv, clock := testBucket()
	ctx := t.Context()
	a, b := NewLocks(ctx, kv, clock, nil), NewLocks(ctx, kv, clock, nil)
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
	kv, _ := testBucket()
	ctx := t.Context()
	c := NewControl(kv)
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
	if err := c.Delete(ctx, "vault/a"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
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
	if l, _ := c.List(ctx, ""); len(l) != 1 {
		t.Fatalf("the control plane lists a namespace registration: %q", l)
	}
}

// TestControlPlaneBadKeys (issue 38 point 6, the swamp bucket): any role that
// writes the bucket may write any key. A key swamp's stores never write (not
// base64url, or not its canonical encoding) is one skipped, reported row: the
// control plane and the namespace registry still list every good key.
func TestControlPlaneBadKeys(t *testing.T) {
	t.Parallel()
	kv, _ := testBucket()
	ctx := t.Context()
	var skipped []string
	c := Control{kv: kv, skipped: func(key, why string) { skipped = append(skipped, key+": "+why) }}
	if err := c.Put(ctx, "vault/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := RegisterNamespace(ctx, kv, "ci", "repo-1"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"c.not=base64", "c.QR", "n.a.b", "n.QR"} { // QR: "A" with stray bits
		if _, err := kv.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.List(ctx, ""); err != nil || len(l) != 1 || l[0] != "vault/a" {
		t.Errorf("control list with bad keys = %q, %v; want [vault/a]", l, err)
	}
	if len(skipped) != 2 {
		t.Errorf("control list reported %q, want the 2 bad keys", skipped)
	}
	skipped = nil
	ns, err := listKeys(ctx, kv, "n.", "", c.skipped)
	if err != nil || len(ns) != 1 || ns[0] != "ci" || len(skipped) != 2 {
		t.Errorf("namespaces with bad keys = %q, %v, reported %q; want [ci] and 2 reported", ns, err, skipped)
	}
}

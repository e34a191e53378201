package agent

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
	"github.com/syncledger/syncledger/projector/host"
)

func testCtx(t testing.TB) context.Context { return testmain.Context(t, 50*time.Second) }

// env is an in-memory ledger (memledger) with a file blob store and a swamp
// bucket, all on one test clock.
type env struct {
	clock *fakeClock
	log   *memledger.Log
	kv    *memledger.KV
	blobs *ledger.Bucket
	full  *ledger.ServerState // what the server says of its disk (ports.ServerState)
	down  atomic.Bool         // the server is unreachable: the ports that need it fail
}

// errDown is an unreachable server's, as the CLI's ports return it.
var errDown = fmt.Errorf("connect to NATS at nats://test: connection refused: %w", ledger.ErrUnreachable)

var ledgerN atomic.Int64

func newEnv(t testing.TB) *env {
	t.Helper()
	clock := newFakeClock()
	dir := t.TempDir()
	l, err := memledger.New(ledger.Info{Name: fmt.Sprintf("agent%d", ledgerN.Add(1)), Blobs: "file://" + dir}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fileblob.New(fileblob.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return &env{clock: clock, log: l, kv: memledger.NewKV(clock.Now), blobs: ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})}
}

// ports are the agent's ports on e, with the cache cache.
type ports struct {
	e     *env
	cache string
	beats chan [2]ledger.Seq // the beats sent (nil: dropped)
	kv    ledger.KV          // the swamp bucket as this agent reaches it (nil: e.kv)
	log   ledger.CommitLog   // the ledger as this agent reads it (nil: e.log)
	// opened, when set, is given each cache Host opens (nil: none).
	opened func(*host.Host)
}

func (p ports) commitLog() ledger.CommitLog {
	if p.log != nil {
		return p.log
	}
	return p.e.log
}

func (p ports) Host(context.Context) (*host.Host, error) {
	if p.e.down.Load() {
		return nil, errDown
	}
	h, err := host.Open(host.Config{Cache: p.cache, Host: "h", Log: p.commitLog(), Blobs: p.e.blobs})
	if err == nil && p.opened != nil {
		p.opened(h)
	}
	return h, err
}

func (p ports) LocalHost(context.Context) (*host.Host, error) {
	return host.OpenLocal(host.Config{Cache: p.cache, Host: "h"})
}

func (p ports) Blobs(context.Context) (*ledger.Bucket, error) {
	if p.e.down.Load() {
		return nil, errDown
	}
	return p.e.blobs, nil
}

func (p ports) SwampKV(context.Context) (ledger.KV, error) {
	if p.e.down.Load() {
		return nil, errDown
	}
	if p.kv != nil {
		return p.kv, nil
	}
	return p.e.kv, nil
}

func (p ports) CommitLog(context.Context) (ledger.CommitLog, error) {
	if p.e.down.Load() {
		return nil, errDown
	}
	return p.commitLog(), nil
}

func (p ports) Foreign(context.Context, string) (*host.Host, error) {
	return nil, ledger.ErrNotFound
}

// ServerState is a full serve's word when the env's server is full.
func (p ports) ServerState(context.Context) (ledger.ServerState, error) {
	if p.e.full != nil {
		return *p.e.full, nil
	}
	return ledger.ServerState{}, nil
}

func (p ports) Beat(_ context.Context, hwm, head ledger.Seq) {
	if p.beats != nil {
		p.beats <- [2]ledger.Seq{hwm, head}
	}
}

// fakeClock is a Clock the test moves (Advance); the bucket's clock too, so
// that a lock's age is what the test made it. An After fires once the clock
// reaches its time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{} // closed and replaced when a waiter comes
}

type waiter struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock by d and fires the Afters due by then.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			w.c <- c.now
		}
	}
	c.waiters = kept
}

// Waiting returns once n Afters wait until at: what a holder's renewal, or a
// lock's next try, waits for once its work is done.
func (c *fakeClock) Waiting(t *testing.T, at time.Time, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second) // a hang, not a timing
	for {
		c.mu.Lock()
		got := 0
		for _, w := range c.waiters {
			if w.at.Equal(at) {
				got++
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d waits on the clock until %v, want %d", got, at, n)
		}
	}
}

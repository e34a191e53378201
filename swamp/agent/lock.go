package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// DefaultLockTTL is a lock's time to live when swamp gives none: a holder that
// stops renewing (killed, partitioned) loses the lock this long after its last
// renewal. A holder renews every TTL/3.
const DefaultLockTTL = 30 * time.Second

// LockInfo is swamp's LockInfo: who holds a lock. AcquiredAt is the time of
// the holder's last renewal, so that swamp's "older than ttlMs is stale" rule
// only ever fires on a holder that stopped renewing; HeldSince (not swamp's)
// is when it took the lock.
type LockInfo struct {
	Holder     string `json:"holder"`
	Hostname   string `json:"hostname"`
	PID        int    `json:"pid"`
	AcquiredAt string `json:"acquiredAt"`
	TTLMs      int64  `json:"ttlMs"`
	Nonce      string `json:"nonce,omitempty"`
	HeldSince  string `json:"heldSince,omitempty"`
	// Host (not swamp's) is the holder's syncledger host id, as `syncledger
	// hosts` and `status` name it; Hostname stays its machine's name.
	Host string `json:"host,omitempty"`
}

// String says who holds the lock — the person, the host — and since when.
func (i LockInfo) String() string {
	since := i.HeldSince
	if since == "" {
		since = i.AcquiredAt
	}
	host := i.Host
	if host == "" {
		host = i.Hostname // an older agent's lock
	}
	return fmt.Sprintf("%s (host %s, pid %d) since %s", i.Holder, host, i.PID, since)
}

// Clock is the time locks are timed by: lock expiry and the times a holder
// writes read Now; waits (polling a held lock, the renewal period) use After.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Locks are distributed locks on a ledger.KV bucket, one key per lock.
//
// A lock is taken with a create-only put (it fails when the key holds a live
// lock), renewed by an update conditioned on the revision the holder last wrote,
// and released by a delete conditioned on that revision. A lock whose entry is
// older than its TTL (by the server's timestamp of its last write) is expired:
// another holder takes it over with an update conditioned on the expired
// entry's revision. So a holder whose lock expired and was taken over can
// neither renew nor release the new holder's lock: its revision is stale.
// Expiry compares the bucket's timestamps (the server's clock) with the Clock
// (this machine's); hosts whose clocks differ by a good part of the TTL see
// locks expire early or late. Every time the locks read is the Clock's: a
// test moves it, with the bucket's (memledger.KV), and sleeps for nothing.
//
// A lock can lapse while its holder still believes it holds it (the holder
// stopped: a suspended laptop), so the ledger is told who holds it: every
// lock taken has its fence record stored by the Fencer (ledger.Fence) before
// Acquire returns, and Fences returns the fences of the locks held, which
// every commit made under them carries. The ledger refuses such a commit
// once another holder took one of its locks (ledger.ErrLockLost): a lapsed
// lock cannot publish, whatever this process believes.
type Locks struct {
	life  context.Context // the renewals'
	kv    ledger.KV
	clock Clock
	fence Fencer // nil: locks without fences

	mu   sync.Mutex
	held map[string]*heldLock // by swamp lock key
}

type heldLock struct {
	rev    uint64
	fence  ledger.Fence // its fence record (Lock "" when unfenced)
	info   LockInfo
	ctx    context.Context // the renewals', under the Locks' life; cancelled by halt
	cancel context.CancelFunc
	done   chan struct{}
	lost   bool
	ttl    time.Duration
	mu     sync.Mutex
	owner  *Locks
}

// Fencer stores the fence record of lock key, which info's holder has just
// taken (ledger.CommitLog.TakeFence on the ledger its commits go to), and
// returns the holder's fence (zero: the ledger holds no fences, its format
// being older: the lock is held unfenced).
type Fencer func(ctx context.Context, key string, info LockInfo) (ledger.Fence, error)

// NewLocks returns the locks of bucket kv, timed by clock (nil: the wall
// clock), whose fence records fence stores (nil: none, for a process that
// publishes nothing under them). ctx is their life: the locks taken are
// renewed until it ends (the agent's end), then they expire after their TTL
// unless released.
func NewLocks(ctx context.Context, kv ledger.KV, clock Clock, fence Fencer) *Locks {
	if clock == nil {
		clock = wallClock{}
	}
	return &Locks{life: ctx, kv: kv, clock: clock, fence: fence, held: map[string]*heldLock{}}
}

// kvKey maps a swamp lock key (".datastore.lock", "data/t/id/.lock",
// ".locks/ns.lock") to a valid KV key.
func kvKey(key string) string {
	return "l." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// ErrLockTimeout: the lock stayed held by another holder for the whole wait.
var ErrLockTimeout = errors.New("lock wait timed out")

// Acquire takes the lock key for info's holder, waiting while another live
// holder has it, polling every retry, for at most maxWait. Once held, the lock
// is renewed every ttl/3 until Release (or until this process dies, after which
// it expires ttl after the last renewal). A lock taken has its fence record
// stored before Acquire returns (Fences); if that fails, the lock is given
// back and Acquire fails: a holder without a fence must not publish under it.
func (l *Locks) Acquire(ctx context.Context, key string, info LockInfo, ttl, retry, maxWait time.Duration) error {
	if ttl <= 0 {
		ttl = DefaultLockTTL
	}
	if retry <= 0 {
		retry = 100 * time.Millisecond
	}
	info.TTLMs = ttl.Milliseconds()
	deadline := l.clock.Now().Add(maxWait)
	k := kvKey(key)
	var last LockInfo
	for {
		info.AcquiredAt = l.clock.Now().UTC().Format(time.RFC3339Nano)
		info.HeldSince = info.AcquiredAt
		val, _ := json.Marshal(info)
		rev, err := l.kv.Create(ctx, k, val)
		if errors.Is(err, ledger.ErrConflict) {
			var e ledger.KVEntry
			e, err = l.kv.Get(ctx, k)
			switch {
			case errors.Is(err, ledger.ErrNotFound):
				continue // released meanwhile
			case err != nil:
			default:
				cur, expired := l.entryInfo(e)
				last = cur
				if expired {
					rev, err = l.kv.Update(ctx, k, val, e.Revision)
					if errors.Is(err, ledger.ErrConflict) {
						err = errHeld
					}
				} else {
					err = errHeld
				}
			}
		}
		if err == nil {
			f, err := l.fenced(ctx, key, k, rev, info)
			if err != nil {
				return err
			}
			l.start(key, k, rev, f, info, ttl)
			return nil
		}
		if !errors.Is(err, errHeld) {
			return fmt.Errorf("lock %s: %w", key, err)
		}
		if !l.clock.Now().Add(retry).Before(deadline) {
			return fmt.Errorf("lock %s is held by %s, renewed %s; waited %s: %w",
				key, last, last.AcquiredAt, maxWait, ErrLockTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock %s: %w", key, context.Cause(ctx))
		case <-l.clock.After(retry):
		}
	}
}

var errHeld = errors.New("held")

// fenced stores the fence record of lock key, just taken at revision rev,
// and returns the fence; on failure it gives the lock back.
func (l *Locks) fenced(ctx context.Context, key, k string, rev uint64, info LockInfo) (ledger.Fence, error) {
	if l.fence == nil {
		return ledger.Fence{}, nil
	}
	f, err := l.fence(ctx, key, info)
	if err == nil {
		return f, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = l.kv.Delete(dctx, k, rev) // what fails expires after its TTL
	return ledger.Fence{}, fmt.Errorf("lock %s: store its fence record in the ledger: %w", key, err)
}

// entryInfo decodes a lock entry and says whether it expired: older than its
// TTL by the server's timestamp of its last write.
func (l *Locks) entryInfo(e ledger.KVEntry) (LockInfo, bool) {
	var info LockInfo
	if json.Unmarshal(e.Value, &info) != nil || info.TTLMs <= 0 {
		return info, true // unreadable: nobody can renew it
	}
	return info, l.clock.Now().Sub(e.Created) > time.Duration(info.TTLMs)*time.Millisecond
}

func (l *Locks) start(key, k string, rev uint64, f ledger.Fence, info LockInfo, ttl time.Duration) {
	ctx, cancel := context.WithCancel(l.life)
	h := &heldLock{rev: rev, fence: f, info: info, ttl: ttl, ctx: ctx, cancel: cancel, done: make(chan struct{}), owner: l}
	l.mu.Lock()
	if old := l.held[key]; old != nil {
		old.halt()
	}
	l.held[key] = h
	l.mu.Unlock()
	go h.renew(k)
}

// renew updates the entry every ttl/3 until halted or refused.
func (h *heldLock) renew(k string) {
	defer close(h.done)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.owner.clock.After(h.ttl / 3):
		}
		if !h.renewOnce(h.ctx, k) {
			return
		}
	}
}

// renewOnce updates the entry, conditioned on the revision this holder last
// wrote, and says whether the lock is still held: a refused update means the
// lock expired and another holder took it over (or it was force-released).
// A failed request (the server unreachable) is tried again at the next tick;
// one request waits at most a period (a bound on the transport, on the wall
// clock: it decides nothing about the lock).
func (h *heldLock) renewOnce(ctx context.Context, k string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost {
		return false
	}
	info := h.info
	info.AcquiredAt = h.owner.clock.Now().UTC().Format(time.RFC3339Nano)
	val, _ := json.Marshal(info)
	ctx, cancel := context.WithTimeout(ctx, h.ttl/3)
	defer cancel()
	rev, err := h.owner.kv.Update(ctx, k, val, h.rev)
	switch {
	case err == nil:
		h.rev = rev
	case errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrNotFound):
		h.lost = true
	}
	return !h.lost
}

// halt stops the renewals (one under way is cancelled) and waits for them.
func (h *heldLock) halt() {
	h.cancel()
	<-h.done
}

// Fences returns the fences of the locks this process holds, by key: every
// commit made under them carries them (host.CommitOptions.Fences). A lock
// whose renewal found it taken is still held here until released: its fence
// goes with the commit, and the ledger refuses it.
func (l *Locks) Fences() []ledger.Fence {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ledger.Fence
	for _, key := range slices.Sorted(maps.Keys(l.held)) {
		if f := l.held[key].fence; f.Lock != "" {
			out = append(out, f)
		}
	}
	return out
}

// Held reports whether this process holds any lock.
func (l *Locks) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held) > 0
}

// Release gives back the lock key if this process holds it: a delete
// conditioned on the holder's last revision, so a lock taken over after it
// expired is left to its new holder. Releasing a lock not held is a no-op.
func (l *Locks) Release(ctx context.Context, key string) error {
	l.mu.Lock()
	h := l.held[key]
	delete(l.held, key)
	l.mu.Unlock()
	if h == nil {
		return nil
	}
	h.halt()
	if h.lost {
		return nil
	}
	err := l.kv.Delete(ctx, kvKey(key), h.rev)
	if err != nil && !errors.Is(err, ledger.ErrConflict) && !errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("release lock %s: %w", key, err)
	}
	return nil
}

// Inspect returns the live holder of key, or nil when it is free or expired.
func (l *Locks) Inspect(ctx context.Context, key string) (*LockInfo, error) {
	e, err := l.kv.Get(ctx, kvKey(key))
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect lock %s: %w", key, err)
	}
	info, expired := l.entryInfo(e)
	if expired {
		return nil, nil
	}
	return &info, nil
}

// ForceRelease deletes the lock key if its holder's nonce is nonce, and says
// whether it did. A wrong nonce, or a lock renewed or taken over between the
// read and the delete, is refused.
func (l *Locks) ForceRelease(ctx context.Context, key, nonce string) (bool, error) {
	e, err := l.kv.Get(ctx, kvKey(key))
	if errors.Is(err, ledger.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("force-release lock %s: %w", key, err)
	}
	info, _ := l.entryInfo(e)
	if nonce == "" || info.Nonce != nonce {
		return false, nil
	}
	err = l.kv.Delete(ctx, kvKey(key), e.Revision)
	if errors.Is(err, ledger.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("force-release lock %s: %w", key, err)
	}
	return true, nil
}

// ReleaseAll releases every lock this process holds (Release), for a holder
// that is gone; a lock it cannot release expires after its TTL.
func (l *Locks) ReleaseAll(ctx context.Context) error {
	l.mu.Lock()
	keys := slices.Collect(maps.Keys(l.held))
	l.mu.Unlock()
	var errs []error
	for _, key := range keys {
		errs = append(errs, l.Release(ctx, key))
	}
	return errors.Join(errs...)
}

// Close stops renewing every held lock without releasing it: they expire after
// their TTL, as if this process had died.
func (l *Locks) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, h := range l.held {
		h.halt()
		delete(l.held, k)
	}
}

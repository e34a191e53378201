package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLockTTL is a lock's time to live when swamp gives none: a holder that
// stops renewing (killed, partitioned) loses the lock this long after its last
// renewal. A holder renews every TTL/3.
const DefaultLockTTL = 30 * time.Second

// LockInfo is swamp's LockInfo: who holds a lock. AcquiredAt is the time of
// the holder's last renewal, so that swamp's "older than ttlMs is stale" rule
// only ever fires on a holder that stopped renewing.
type LockInfo struct {
	Holder     string `json:"holder"`
	Hostname   string `json:"hostname"`
	PID        int    `json:"pid"`
	AcquiredAt string `json:"acquiredAt"`
	TTLMs      int64  `json:"ttlMs"`
	Nonce      string `json:"nonce,omitempty"`
}

// Locks are distributed locks on a JetStream KV bucket, one key per lock.
//
// A lock is taken with a create-only put (it fails when the key holds a live
// lock), renewed by an update conditioned on the revision the holder last wrote,
// and released by a delete conditioned on that revision. A lock whose entry is
// older than its TTL (by the server's timestamp of its last write) is expired:
// another holder takes it over with an update conditioned on the expired
// entry's revision. So a holder whose lock expired and was taken over can
// neither renew nor release the new holder's lock: its revision is stale.
// Expiry compares the server's timestamps with this machine's clock; hosts
// whose clocks differ by a good part of the TTL see locks expire early or late.
type Locks struct {
	kv jetstream.KeyValue

	mu   sync.Mutex
	held map[string]*heldLock // by swamp lock key
}

type heldLock struct {
	rev   uint64
	info  LockInfo
	stop  chan struct{}
	done  chan struct{}
	lost  bool
	ttl   time.Duration
	mu    sync.Mutex
	owner *Locks
}

// NewLocks returns the locks of bucket kv.
func NewLocks(kv jetstream.KeyValue) *Locks {
	return &Locks{kv: kv, held: map[string]*heldLock{}}
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
// it expires ttl after the last renewal).
func (l *Locks) Acquire(ctx context.Context, key string, info LockInfo, ttl, retry, maxWait time.Duration) error {
	if ttl <= 0 {
		ttl = DefaultLockTTL
	}
	if retry <= 0 {
		retry = 100 * time.Millisecond
	}
	info.TTLMs = ttl.Milliseconds()
	deadline := time.Now().Add(maxWait)
	k := kvKey(key)
	var last LockInfo
	for {
		info.AcquiredAt = time.Now().UTC().Format(time.RFC3339Nano)
		val, _ := json.Marshal(info)
		rev, err := l.kv.Create(ctx, k, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			var e jetstream.KeyValueEntry
			e, err = l.kv.Get(ctx, k)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				continue // released meanwhile
			case err != nil:
			default:
				cur, expired := entryInfo(e)
				last = cur
				if expired {
					rev, err = l.kv.Update(ctx, k, val, e.Revision())
					if errors.Is(err, jetstream.ErrKeyExists) {
						err = errHeld
					}
				} else {
					err = errHeld
				}
			}
		}
		if err == nil {
			l.start(key, k, rev, info, ttl)
			return nil
		}
		if !errors.Is(err, errHeld) {
			return fmt.Errorf("lock %s: %w", key, err)
		}
		if !time.Now().Add(retry).Before(deadline) {
			return fmt.Errorf("lock %s is held by %s (host %s, pid %d, renewed %s); waited %s: %w",
				key, last.Holder, last.Hostname, last.PID, last.AcquiredAt, maxWait, ErrLockTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
	}
}

var errHeld = errors.New("held")

// entryInfo decodes a lock entry and says whether it expired: older than its
// TTL by the server's timestamp of its last write.
func entryInfo(e jetstream.KeyValueEntry) (LockInfo, bool) {
	var info LockInfo
	if json.Unmarshal(e.Value(), &info) != nil || info.TTLMs <= 0 {
		return info, true // unreadable: nobody can renew it
	}
	return info, time.Since(e.Created()) > time.Duration(info.TTLMs)*time.Millisecond
}

func (l *Locks) start(key, k string, rev uint64, info LockInfo, ttl time.Duration) {
	h := &heldLock{rev: rev, info: info, ttl: ttl, stop: make(chan struct{}), done: make(chan struct{}), owner: l}
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
	t := time.NewTicker(h.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if !h.renewOnce(k) {
			return
		}
	}
}

// renewOnce updates the entry, conditioned on the revision this holder last
// wrote, and says whether the lock is still held: a refused update means the
// lock expired and another holder took it over (or it was force-released).
// A failed request (the server unreachable) is tried again at the next tick.
func (h *heldLock) renewOnce(k string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost {
		return false
	}
	info := h.info
	info.AcquiredAt = time.Now().UTC().Format(time.RFC3339Nano)
	val, _ := json.Marshal(info)
	ctx, cancel := context.WithTimeout(context.Background(), h.ttl/3)
	defer cancel()
	rev, err := h.owner.kv.Update(ctx, k, val, h.rev)
	switch {
	case err == nil:
		h.rev = rev
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound):
		h.lost = true
	}
	return !h.lost
}

func (h *heldLock) halt() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
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
	err := l.kv.Delete(ctx, kvKey(key), jetstream.LastRevision(h.rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("release lock %s: %w", key, err)
	}
	return nil
}

// Inspect returns the live holder of key, or nil when it is free or expired.
func (l *Locks) Inspect(ctx context.Context, key string) (*LockInfo, error) {
	e, err := l.kv.Get(ctx, kvKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect lock %s: %w", key, err)
	}
	info, expired := entryInfo(e)
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
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("force-release lock %s: %w", key, err)
	}
	info, _ := entryInfo(e)
	if nonce == "" || info.Nonce != nonce {
		return false, nil
	}
	err = l.kv.Delete(ctx, kvKey(key), jetstream.LastRevision(e.Revision()))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("force-release lock %s: %w", key, err)
	}
	return true, nil
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

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

// Offline: when the ledger's server cannot be reached (ledger.ErrUnreachable).
//
// Without Config.Offline, every request that needs the ledger fails as it
// always did, naming the server; swamp's read-only commands, which send the
// agent nothing, read the cache as it is, and the close at swamp's exit says
// that what they read may be stale (PushResult.Offline, HWM).
//
// With Config.Offline (the opt-in: `swamp agent --offline-ok`, the
// datastore's "offline" setting), swamp runs on the cache as it is: a pull
// pulls nothing and says so (PullResult.Offline), swamp's locks are this
// host's alone (offlineLocks: a file lock per key in the cache's state
// directory, so two swamp commands on this host still take turns), and a
// push publishes nothing and says so (PushResult.Offline): what swamp wrote
// stays in the cache, uncommitted, and the next swamp command that reaches
// the ledger publishes it through the usual rules — its pull renumbers this
// host's data versions past other hosts' runs of the same numbers, and a file
// both changed is a conflict, reported as always.

// noteOffline records that the ledger could not be reached, and why.
func (a *Agent) noteOffline(err error) {
	if !errors.Is(err, ledger.ErrUnreachable) {
		return
	}
	a.offMu.Lock()
	defer a.offMu.Unlock()
	if a.offline == nil {
		a.offline = err
	}
}

// offlineWhy says why the ledger was not reached ("": it was, or not tried).
func (a *Agent) offlineWhy() string {
	a.offMu.Lock()
	defer a.offMu.Unlock()
	if a.offline == nil {
		return ""
	}
	return a.offline.Error()
}

// offlineOK says whether err is the server's absence and the opt-in lets
// swamp run without it.
func (a *Agent) offlineOK(err error) bool {
	if errors.Is(err, ledger.ErrUnreachable) {
		a.noteOffline(err)
		return a.cfg.Offline
	}
	return false
}

// openLocal opens the cache without its ledger, for swamp to run on offline
// (under hostMu).
func (a *Agent) openLocal(ctx context.Context, why error) (*host.Host, error) {
	h, err := a.cfg.Ports.LocalHost(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w; and the cache does not open without it: %w", why, err)
	}
	h.Release()
	a.h, a.local = h, true
	return h, nil
}

// offlineResult is a push's answer when nothing could be published: the
// cache's mark, and why.
func (a *Agent) offlineResult(h *host.Host, hints int) PushResult {
	return PushResult{HWM: h.HWM(), Hints: hints, Offline: a.offlineWhy()}
}

// staleResult is the close's answer when swamp wrote nothing: if the ledger
// could not be reached, what swamp read was this cache as it is (its mark,
// HWM), which may be stale. The cache opened at the agent's start is waited
// for a little, not for a server's connect timeout.
func (a *Agent) staleResult(ctx context.Context) PushResult {
	select {
	case <-a.openDone:
	case <-time.After(staleWait):
	case <-ctx.Done():
	}
	why := a.offlineWhy()
	if why == "" {
		return PushResult{}
	}
	res := PushResult{Offline: why}
	if a.lockHost(ctx) == nil {
		defer a.unlockHost()
		h := a.h
		if h == nil {
			if lh, err := a.cfg.Ports.LocalHost(ctx); err == nil {
				lh.Release()
				a.h, a.local, h = lh, true, lh
			}
		}
		if h != nil {
			res.HWM = h.HWM()
		}
	}
	return res
}

// staleWait bounds how long the close waits for the agent's first connect
// to tell whether the server answers.
const staleWait = time.Second

// offlineLocks are swamp's locks while the ledger cannot be reached, with the
// opt-in: this host's alone, one lock file a key in the cache's state
// directory (the kernel frees it if the agent dies), so that two swamp
// commands on this host still take turns; other hosts are not kept out (a
// run of theirs meanwhile is numbered apart at the next publish).
type offlineLocks struct {
	dir  string
	mu   sync.Mutex
	held map[string]*os.File
}

func newOfflineLocks(cache string) *offlineLocks {
	return &offlineLocks{dir: filepath.Join(cache, ledger.StateDir, "swamp-locks"), held: map[string]*os.File{}}
}

func (l *offlineLocks) acquire(ctx context.Context, key string, retry, maxWait time.Duration) error {
	if retry <= 0 {
		retry = 100 * time.Millisecond
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("lock %s (offline, on this host): %w", key, err)
	}
	f, err := os.OpenFile(filepath.Join(l.dir, kvKey(key)), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("lock %s (offline, on this host): %w", key, err)
	}
	deadline := time.Now().Add(maxWait)
	for {
		ok, err := tryLockFile(f)
		if err != nil {
			f.Close()
			return fmt.Errorf("lock %s (offline, on this host): %w", key, err)
		}
		if ok {
			l.mu.Lock()
			if old := l.held[key]; old != nil {
				old.Close()
			}
			l.held[key] = f
			l.mu.Unlock()
			return nil
		}
		if !time.Now().Add(retry).Before(deadline) {
			f.Close()
			return fmt.Errorf("lock %s is held by another swamp command on this host (offline: the ledger is unreachable); waited %s: %w", key, maxWait, ErrLockTimeout)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("lock %s: %w", key, context.Cause(ctx))
		case <-time.After(retry):
		}
	}
}

func (l *offlineLocks) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.held[key]; f != nil {
		f.Close() // closing the file frees its lock
		delete(l.held, key)
	}
}

func (l *offlineLocks) releaseAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, f := range l.held {
		f.Close()
		delete(l.held, k)
	}
}

package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// The operations on the swamp bucket: locks and the control plane.

// bucket opens the swamp bucket on first use; its locks are renewed for as
// long as the agent serves (Serve's context).
func (a *Agent) bucket(ctx context.Context) (ledger.KV, error) {
	a.kvOnce.Do(func() {
		a.kv, a.kvErr = a.cfg.Ports.SwampKV(ctx)
		if a.kvErr == nil {
			a.locks = NewLocks(a.life, a.kv, a.cfg.Clock, a.fence)
		}
	})
	return a.kv, a.kvErr
}

// fence stores the fence record of lock key, which info's holder has just
// taken, in the datastore's ledger (Locks): every commit of this agent made
// under the lock carries the fence it returns (fences).
func (a *Agent) fence(ctx context.Context, key string, info LockInfo) (ledger.Fence, error) {
	log, err := a.cfg.Ports.CommitLog(ctx)
	if err != nil {
		return ledger.Fence{}, err
	}
	now := time.Now
	if a.cfg.Clock != nil {
		now = a.cfg.Clock.Now
	}
	f, li, err := takeFence(ctx, log, a.cfg.Host, now(), key, info)
	if err == nil && f.Lock == "" {
		a.unfencedOnce.Do(func() {
			a.cfg.Logger.Warn("swamp's locks are not fenced: a host stopped past a lock's TTL could publish under a lock another host took; "+
				"once every host runs this release, an admin runs 'syncledger init --format "+fmt.Sprint(ledger.LogFormat)+"'",
				"ledger", li.Name, "format", li.Format)
		})
	}
	return f, err
}

// takeFence stores in log the fence record of lock key, which info's holder
// on host hostID ("": its machine) took at now, and returns the fence; a
// zero fence on a ledger whose format holds none (ledger.Info.Fenced: no
// fence until its admin raises its format), with the ledger's Info.
func takeFence(ctx context.Context, log ledger.CommitLog, hostID string, now time.Time, key string, info LockInfo) (ledger.Fence, ledger.Info, error) {
	li, err := log.Info(ctx)
	if err != nil || !li.Fenced() {
		return ledger.Fence{}, li, err
	}
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		return ledger.Fence{}, li, err
	}
	if hostID == "" {
		hostID = info.Hostname
	}
	holder := fmt.Sprintf("%s (pid %d)", info.Holder, info.PID)
	if len(holder) > ledger.MaxHostLen {
		holder = holder[:ledger.MaxHostLen]
	}
	seq, err := log.TakeFence(ctx, ledger.FenceRecord{V: ledger.FormatVersion, Ledger: li.UUID, Lock: key, ID: id,
		Host: clipHost(hostID), Holder: strings.ToValidUTF8(holder, "?"), At: now.UTC()})
	if err != nil {
		return ledger.Fence{}, li, err
	}
	return ledger.Fence{Lock: key, Seq: seq}, li, nil
}

// clipHost keeps a host id within a fence record's bound.
func clipHost(s string) string {
	if s == "" {
		return "unknown"
	}
	if len(s) > ledger.MaxHostLen {
		s = s[:ledger.MaxHostLen]
	}
	return strings.ToValidUTF8(s, "?")
}

// fences returns the fences of the swamp locks this agent holds: every
// commit it makes carries them all (model locks and the global lock alike),
// and the ledger refuses it once another holder took one of them.
func (a *Agent) fences(ctx context.Context) []ledger.Fence {
	if _, err := a.bucket(ctx); err != nil {
		return nil // no bucket: no lock held
	}
	return a.locks.Fences()
}

// holding reports whether this agent holds a lock (a model's, a
// namespace's): its command acts on what it pulls as the latest.
func (a *Agent) holding(ctx context.Context) bool {
	if _, err := a.bucket(ctx); err != nil {
		return false // no bucket: no lock held
	}
	return a.locks.Held()
}

// published notes what a publish of this command met: a lost lock stops
// every later publish of the command's files (publishUnpushed).
func (a *Agent) published(err error) error {
	if errors.Is(err, ledger.ErrLockLost) {
		a.lostMu.Lock()
		if a.lost == nil {
			a.lost = err
		}
		a.lostMu.Unlock()
	}
	return err
}

// lockLost returns the lost lock a publish of this command met, if any.
func (a *Agent) lockLost() error {
	a.lostMu.Lock()
	defer a.lostMu.Unlock()
	return a.lost
}

func (a *Agent) lockAcquire(ctx context.Context, req LockAcquireRequest) (bool, error) {
	if _, err := a.bucket(ctx); err != nil {
		if a.offlineOK(err) {
			return true, a.offLocks.acquire(ctx, req.Key, ms(req.RetryMs), ms(req.MaxWaitMs))
		}
		return false, err
	}
	h := req.Holder
	info := LockInfo{Holder: holderName(h.Holder, h.Hostname), Hostname: h.Hostname, PID: h.PID, Nonce: h.Nonce, Host: a.cfg.Host}
	if err := a.locks.Acquire(ctx, req.Key, info, ms(req.TTLMs), ms(req.RetryMs), ms(req.MaxWaitMs)); err != nil {
		return false, err
	}
	return true, nil
}

func (a *Agent) lockRelease(ctx context.Context, req LockKeyRequest) (bool, error) {
	if _, err := a.bucket(ctx); err != nil {
		if a.offlineOK(err) {
			a.offLocks.release(req.Key)
			return true, nil
		}
		return false, err
	}
	return true, a.locks.Release(ctx, req.Key)
}

func (a *Agent) lockInspect(ctx context.Context, req LockKeyRequest) (*LockInfo, error) {
	if _, err := a.bucket(ctx); err != nil {
		if a.offlineOK(err) {
			return nil, nil // offline: no other host's lock is known
		}
		return nil, err
	}
	return a.locks.Inspect(ctx, req.Key)
}

func (a *Agent) lockForceRelease(ctx context.Context, req LockForceReleaseRequest) (bool, error) {
	if _, err := a.bucket(ctx); err != nil {
		if a.offlineOK(err) {
			return false, nil
		}
		return false, err
	}
	return a.locks.ForceRelease(ctx, req.Key, req.Nonce)
}

// holderName is who takes a lock, USER@MACHINE as swamp names it, with the
// user this process runs as where swamp knew none (no USER in its
// environment: the extension says "swamp", swamp itself "unknown"), so that
// a lock's messages name a person, not only a machine (issue 39).
func holderName(holder, machine string) string {
	name, at, ok := strings.Cut(holder, "@")
	if ok && name != "" && name != "swamp" && name != "unknown" {
		return holder
	}
	if !ok {
		at = machine
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username + "@" + at
	}
	return holder
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// control returns the control-plane store on the bucket.
func (a *Agent) control(ctx context.Context) (Control, error) {
	kv, err := a.bucket(ctx)
	return Control{kv: kv, skipped: a.skippedKey}, err
}

func (a *Agent) controlPut(ctx context.Context, req ControlPutRequest) (bool, error) {
	c, err := a.control(ctx)
	if err != nil {
		return false, err
	}
	return true, c.Put(ctx, req.Key, req.Data)
}

func (a *Agent) controlGet(ctx context.Context, req ControlKeyRequest) ([]byte, error) {
	c, err := a.control(ctx)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, req.Key)
}

func (a *Agent) controlDelete(ctx context.Context, req ControlKeyRequest) (bool, error) {
	c, err := a.control(ctx)
	if err != nil {
		return false, err
	}
	return true, c.Delete(ctx, req.Key)
}

func (a *Agent) controlList(ctx context.Context, req ControlListRequest) ([]string, error) {
	c, err := a.control(ctx)
	if err != nil {
		return nil, err
	}
	return c.List(ctx, req.Prefix)
}

func (a *Agent) controlPutIfAbsent(ctx context.Context, req ControlPutRequest) (bool, error) {
	c, err := a.control(ctx)
	if err != nil {
		return false, err
	}
	return c.PutIfAbsent(ctx, req.Key, req.Data)
}

func (a *Agent) namespaceRegister(ctx context.Context, req NamespaceRegisterRequest) (bool, error) {
	kv, err := a.bucket(ctx)
	if err != nil {
		return false, err
	}
	return true, RegisterNamespace(ctx, kv, req.Namespace, req.RepoID)
}

func (a *Agent) namespaceList(ctx context.Context, _ NamespaceListRequest) ([]string, error) {
	kv, err := a.bucket(ctx)
	if err != nil {
		return nil, err
	}
	return listKeys(ctx, kv, "n.", "", a.skippedKey)
}

// skippedKey reports a key of the swamp bucket a listing passed over.
func (a *Agent) skippedKey(key, why string) {
	a.cfg.Logger.Warn("skipping a key of the swamp bucket that swamp's stores never write", "key", key, "why", why)
}

package agent

import (
	"context"
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
			a.locks = NewLocks(a.life, a.kv, a.cfg.Clock)
		}
	})
	return a.kv, a.kvErr
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

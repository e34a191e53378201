package agent

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
)

// closeTimeout bounds the publish at swamp's exit: swamp waits for it.
const closeTimeout = 10 * time.Second

// CloseRequest is sent at swamp's exit, over the close pipes (HelloResult's
// close) or stdin: publish what swamp wrote since its last push, and answer
// once it is published.
type CloseRequest struct {
	Hints []string `json:"hints,omitempty"` // the markDirty paths no push published
	// Publish is false when a push of this command failed: the agent
	// publishes nothing now (the next command does), and only notes that
	// swamp is done.
	Publish bool `json:"publish"`
}

// noteHints records markDirty paths as not pushed yet (under hintMu).
func (a *Agent) noteHints(paths []string) {
	if a.unpushed == nil {
		a.unpushed = map[string]bool{}
	}
	for _, p := range paths {
		a.unpushed[p] = true
	}
}

// pushed forgets the paths a publish took (taken before it).
func (a *Agent) pushed(taken []string) {
	a.hintMu.Lock()
	defer a.hintMu.Unlock()
	for _, p := range taken {
		delete(a.unpushed, p)
	}
}

// unpushedHints returns the markDirty paths no publish took yet.
func (a *Agent) unpushedHints() []string {
	a.hintMu.Lock()
	defer a.hintMu.Unlock()
	return slices.Sorted(maps.Keys(a.unpushed))
}

// close publishes what swamp wrote after its last push: the paths it marked
// dirty since (and, where the agent keeps a dirty set, what that set saw),
// renumbering this host's data versions past another host's as a push does.
// Nothing written since the last push: nothing published, no request sent.
func (a *Agent) close(ctx context.Context, req CloseRequest) (PushResult, error) {
	a.hintMu.Lock()
	a.noteHints(a.own(req.Hints))
	a.closed = true
	a.hintMu.Unlock()
	if !req.Publish {
		return PushResult{}, nil
	}
	return a.publishUnpushed(ctx)
}

// publishUnpushed publishes the files below the markDirty paths no push took
// (close, and the agent's end when no close came), under the locks still
// held (none, once swamp released them). After a publish of this command
// met a lost lock, it publishes nothing and says so: what swamp wrote under
// that lock is the next command's to publish, after the other holder's.
func (a *Agent) publishUnpushed(ctx context.Context) (PushResult, error) {
	hints := a.unpushedHints()
	if len(hints) == 0 {
		return a.staleResult(ctx), nil
	}
	if err := a.lockLost(); err != nil {
		return PushResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	a.hinted()
	a.scanned()
	return cacheOp(a, ctx, a.cfg.Namespace, func(h *host.Host) (PushResult, error) {
		if a.local {
			return a.offlineResult(h, len(hints)), nil
		}
		changed, done := a.changed(ctx, hints)
		if changed == nil {
			// No dirty set: swamp marks every path dirty before it writes
			// there, so these hold what it wrote since its last push. Anything
			// else is the next push's to find.
			changed, done = hints, func() {}
		}
		res, _, err := swamp.CommitRenumbered(ctx, h, host.CommitOptions{Message: "swamp: at swamp's exit", Prepared: a.known, Changed: changed, Fences: a.fences(ctx)})
		if a.offlineOK(err) {
			return a.offlineResult(h, len(hints)), nil
		}
		if err = a.published(err); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = errors.New("the ledger did not answer within " + closeTimeout.String())
			}
			return PushResult{}, err
		}
		done()
		a.pushed(hints)
		return pushResult(res, len(hints)), nil
	})
}

// pushResult is the answer of a publish.
func pushResult(res host.CommitResult, hints int) PushResult {
	ids := make([]string, len(res.Commits))
	for i, c := range res.Commits {
		ids[i] = c.Commit
	}
	return PushResult{Files: res.Written + res.Deleted, Commit: res.Commit, Commits: ids, HWM: res.HWM, Hints: hints}
}

// serveClose answers close requests on the close pipes until they are closed.
func (a *Agent) serveClose(ctx context.Context, p *closePipes) {
	p.serve(func(req Request, line []byte) Response {
		var (
			res any
			cr  CloseRequest
			err = json.Unmarshal(line, &cr)
		)
		if err == nil {
			res, err = a.close(ctx, cr)
		}
		resp := Response{ID: req.ID, Result: res}
		if err != nil {
			resp.Result, resp.Error = nil, a.describe(err)
		}
		return resp
	})
}

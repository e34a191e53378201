package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
)

// The cache operations: pull, prepare, push, commit, hydrate, verify.
//
// A "hint" (swamp's markDirty path, sent as swamp writes) gets no answer.
// swamp sends it just before it writes there, so the next hint (or the push)
// says that write is done: the agent then hashes the files below the previous
// hint's path, uploads their content and fsyncs them in the background, while
// swamp carries on, so that the push finds that work done. Nothing is
// published or recorded from a hint: the push still scans the cache, uploads
// what is not stored and fsyncs every file it commits (an fsync of a file
// already synced costs little). A hint's uploads are bounded as the push's
// are (host.Host.PushBlobs), and a push waits for them only while they move
// (hinted): a store that never answers is met by the push, said and bounded.
//
// The agent keeps a dirty set of the cache as `syncledger watch` does
// (package dirty, inotify), for itself: after each pull it scans the cache
// whole in the background, while swamp runs the command, and a push then
// checks only the paths found changed there and those the set saw change
// since (plus the hints). Where it has no set (not Linux, inotify limits), a
// push scans the whole cache.

// open connects to the ledger's bucket and opens the cache (Agent); errors
// are left to the calls that need them.
func (a *Agent) open(ctx context.Context) {
	defer close(a.openDone)
	if _, err := a.bucket(ctx); err != nil {
		a.noteOffline(err)
	}
	if a.lockHost(ctx) != nil {
		return
	}
	defer a.unlockHost()
	h, err := a.host(ctx)
	if err != nil || a.local {
		return
	}
	root := h.Dir().Root()
	if _, err := os.Stat(dirty.SocketPath(root)); err == nil {
		return // a `syncledger watch` keeps the set (Config.Watch)
	}
	if w, err := dirty.New(dirty.Config{Root: root, MaxDirs: maxWatchedDirs}); err == nil {
		a.watch = w
		go func() { _ = w.Watch(ctx) }()
	}
}

// maxWatchedDirs bounds the inotify watches an agent takes (one a directory
// of the cache, from the user's fs.inotify.max_user_watches): past it, pushes
// scan the whole cache.
const maxWatchedDirs = 20000

// scanAfterPull starts the scan of the whole cache that follows a pull
// (Agent), under hostMu.
func (a *Agent) scanAfterPull(ctx context.Context) {
	a.base, a.baseSnap = nil, nil
	if a.watch == nil {
		return
	}
	done := make(chan struct{})
	a.hintMu.Lock()
	prev := a.baseDone
	a.baseDone = done
	a.hintMu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev // in order: the last pull's scan is the last to set base
		}
		if a.lockHost(ctx) != nil {
			return
		}
		defer a.unlockHost()
		snap, err := a.watch.Snapshot(ctx)
		if err != nil {
			return
		}
		// Local changes found here are uploaded, as a prepare does, and
		// what it read is the push's (known).
		res, err := a.h.Prepare(ctx, host.PrepareOptions{Prepared: a.known})
		if err != nil {
			return
		}
		a.watch.Ack(snap.Epoch, snap.Seq, true, nil)
		a.base, a.baseSnap = append([]string{}, res.Paths...), snap
	}()
}

// scanned waits for the scan after the last pull, if one runs.
func (a *Agent) scanned() {
	a.hintMu.Lock()
	done := a.baseDone
	a.hintMu.Unlock()
	if done != nil {
		<-done
	}
}

// host returns the open cache, opening it if it is not (under hostMu).
func (a *Agent) host(ctx context.Context) (*host.Host, error) {
	if a.h == nil {
		h, err := a.cfg.Ports.Host(ctx)
		if a.offlineOK(err) {
			return a.openLocal(ctx, err)
		}
		if err != nil {
			return nil, err
		}
		// Between operations the cache is free for other processes (another
		// swamp command of this repo, a status).
		h.Release()
		a.h = h
	}
	return a.h, nil
}

// hint takes a markDirty hint (Agent) and starts the work of the one before
// it: the content of the files at or below its paths that changed since the
// agent started goes to the blob store, and the files are fsynced. Failures
// are left for the push to meet.
func (a *Agent) hint(ctx context.Context, next []string) {
	a.hintMu.Lock()
	a.noteHints(next)
	paths := a.hintLast
	a.hintLast = next
	if paths == nil {
		a.hintMu.Unlock()
		return
	}
	prev, done := a.hintDone, make(chan struct{})
	a.hintDone = done
	if a.hintCtx == nil {
		a.hintCtx, a.hintStop = context.WithCancel(ctx)
	}
	ctx = a.hintCtx
	a.hintMu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev // one hint at a time, in order
		}
		a.hintMoved()
		if a.lockHost(ctx) != nil {
			return
		}
		h, err := a.host(ctx)
		a.unlockHost()
		if err != nil {
			return
		}
		blobs, err := a.cfg.Ports.Blobs(ctx)
		if err != nil {
			return
		}
		dir := h.Dir()
		ign, err := dir.Ignore()
		if err != nil {
			return
		}
		var files []string
		_ = dir.ScanPaths(ign, paths, func(rel string, fi cachefs.FileInfo) error {
			if fi.ModTime.After(a.hintSince) {
				files = append(files, rel)
			}
			return nil
		}, func(cachefs.Skipped) {})
		// Under the push's bound (host.PushBlobs), one attempt each (a
		// retry's reading of the content again is no sign of the store), and
		// no more puts once one failed: the push meets the store's failure,
		// retried, said and bounded. What it reads and stores is the
		// push's (known).
		p := h.PushBlobs(blobs).Retry()
		p.Attempts = 1
		_ = h.PrepareFiles(ctx, blobs.WithRetry(p), files, a.known, a.hintMoved)
		_ = dir.Flush(files, nil, 8)
	}()
}

// hinted waits until the work of the hints so far is done, and drops the last
// one (its write is the push's to find). Work that has not moved for
// hintIdle (a blob store that takes none of its content: the push will meet
// it, said and bounded) is stopped rather than waited for, silently.
func (a *Agent) hinted() {
	a.hintMu.Lock()
	last := a.hintDone
	a.hintLast = nil
	a.hintMu.Unlock()
	if last == nil {
		return
	}
	t := time.NewTicker(hintIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-last:
			return
		case <-t.C:
			if time.Since(time.Unix(0, a.hintHeard.Load())) < hintIdle {
				continue
			}
			a.hintMu.Lock()
			stop := a.hintStop
			a.hintCtx, a.hintStop = nil, nil
			a.hintMu.Unlock()
			if stop != nil {
				stop()
			}
			<-last
			return
		}
	}
}

// hintIdle is how long hints' work that does not move is waited for: the
// host's report time (host.DefaultReport), after which a push's own wait
// would be said.
const hintIdle = host.DefaultReport

// hintMoved notes that the hints' work moved.
func (a *Agent) hintMoved() { a.hintHeard.Store(time.Now().UnixNano()) }

// cacheOp runs fn on the open cache, one cache operation at a time, for a
// request of the datastore's namespace ns.
func cacheOp[T any](a *Agent, ctx context.Context, ns string, fn func(*host.Host) (T, error)) (T, error) {
	var zero T
	if ns != a.cfg.Namespace {
		return zero, &NamespaceError{Swamp: ns, Config: a.cfg.Namespace}
	}
	if err := a.lockHost(ctx); err != nil {
		return zero, err
	}
	defer a.unlockHost()
	h, err := a.host(ctx)
	if err != nil {
		return zero, err
	}
	return fn(h)
}

// pull is always a full sync: a per-model pull names only the models a
// command locks, not those it reads (swamp-club#3193).
func (a *Agent) pull(ctx context.Context, req PullRequest) (PullResult, error) {
	return cacheOp(a, ctx, req.Namespace, func(h *host.Host) (PullResult, error) {
		if a.local {
			// Offline, with the opt-in: swamp runs on the cache as it is.
			return PullResult{HWM: h.HWM(), Head: h.HWM(), Offline: a.offlineWhy()}, nil
		}
		// This host's data versions that another host's runs took meanwhile
		// (a push that did not reach the ledger, or was made under a lock
		// lost) move past them, and are published at once, whatever model
		// this command runs, under the locks it holds.
		// A ledger that lost commits this cache applied (a server restored
		// from an older backup) is healed by the sync: the runs it lost go
		// out here too, renumbered past the ledger's where it took their
		// numbers since.
		//
		// Under a lock the pull is fresh: it asks the origin for its head
		// (one request a mirror never answers) and reads up to it, so the
		// locked model's latest commit is here even when this host reads
		// from a lagging mirror.
		res, rn, err := swamp.SyncRenumbered(ctx, h, host.SyncOptions{Lazy: req.MetadataOnly, Fresh: a.holding(ctx)})
		if a.offlineOK(err) {
			return PullResult{HWM: h.HWM(), Head: h.HWM(), Offline: a.offlineWhy()}, nil
		}
		if err == nil && (len(rn.Moved)+len(rn.Regenerated) > 0 || res.Healed != nil) {
			var (
				cr   host.CommitResult
				more swamp.Renumbered
			)
			msg := "swamp: this host's runs, published after another host's"
			if res.Healed != nil {
				msg = host.RepublishMessage
			}
			cr, more, err = swamp.CommitRenumbered(ctx, h, host.CommitOptions{Message: msg, Prepared: a.known, Fences: a.fences(ctx)})
			err = a.published(err)
			rn.Moved = append(rn.Moved, more.Moved...)
			res.HWM = cr.HWM
		}
		if err == nil {
			a.scanAfterPull(ctx)
			a.beat(ctx, res.HWM, res.Head)
		}
		out := PullResult{Files: res.Written + res.Deleted + len(rn.Moved), HWM: res.HWM, Head: res.Head}
		for _, m := range rn.Moved {
			out.Renumbered = append(out.Renumbered, fmt.Sprintf("%s: version %d is now %d", m.Data, m.From, m.To))
		}
		if hd := res.Healed; hd != nil {
			out.Healed = healedLines(hd, rn)
		}
		return out, err
	})
}

func (a *Agent) prepare(ctx context.Context, req PushRequest) (PrepareResult, error) {
	a.hinted() // rather than doing the hints' work twice
	a.scanned()
	return cacheOp(a, ctx, req.Namespace, func(h *host.Host) (PrepareResult, error) {
		if a.local {
			return PrepareResult{}, nil // offline: the push publishes nothing either
		}
		changed, _ := a.changed(ctx, a.own(req.Hints))
		res, err := h.Prepare(ctx, host.PrepareOptions{Changed: changed, Prepared: a.known})
		if a.offlineOK(err) {
			return PrepareResult{}, nil
		}
		if err != nil {
			return PrepareResult{}, err
		}
		a.prepared = append(make([]string, 0, len(res.Paths)), res.Paths...)
		return PrepareResult{Files: res.Files, Bytes: res.Bytes}, nil
	})
}

func (a *Agent) push(ctx context.Context, req PushRequest) (PushResult, error) {
	return a.publish(ctx, "push", req)
}

func (a *Agent) commit(ctx context.Context, req PushRequest) (PushResult, error) {
	return a.publish(ctx, "commit", req)
}

// publish is push and commit: one commit of what changed (more when it
// touches more partitions than one commit holds), under every lock this
// agent holds (fences).
func (a *Agent) publish(ctx context.Context, op string, req PushRequest) (PushResult, error) {
	a.hinted() // rather than doing the hints' work twice
	a.scanned()
	hints := a.own(req.Hints)
	return cacheOp(a, ctx, req.Namespace, func(h *host.Host) (PushResult, error) {
		prepared := a.prepared
		a.prepared = nil
		if a.local {
			return a.offlineResult(h, len(hints)), nil // offline: it stays for the next command
		}
		var (
			changed []string
			done    = func() {}
		)
		if prepared != nil && op == "commit" {
			// swamp's commitPush follows its preparePush with no write in
			// between (it holds the model locks): the paths the prepare found
			// are what changed, and the commit need not look further. (A file
			// changed outside swamp meanwhile is committed by the next push.)
			// No dirty set is acked for this narrower check.
			changed = prepared
		} else {
			changed, done = a.changed(ctx, hints)
		}
		taken := a.unpushedHints()
		res, _, err := swamp.CommitRenumbered(ctx, h, host.CommitOptions{Message: "swamp " + op, Prepared: a.known, Changed: changed, Fences: a.fences(ctx)})
		if a.offlineOK(err) {
			return a.offlineResult(h, len(hints)), nil
		}
		err = a.published(err)
		if err == nil {
			done()
			a.pushed(taken)
			if len(res.Commits) > 0 {
				a.beat(ctx, res.HWM, res.HWM)
			}
		}
		return pushResult(res, len(hints)), err
	})
}

// hydrate fetches one file a lazy pull left out, and says whether it wrote it.
func (a *Agent) hydrate(ctx context.Context, req HydrateRequest) (bool, error) {
	return cacheOp(a, ctx, req.Namespace, func(h *host.Host) (bool, error) {
		paths := a.own([]string{req.Path})
		if len(paths) == 0 {
			return false, nil // not this datastore's path
		}
		res, err := h.Fetch(ctx, paths)
		if errors.Is(err, ledger.ErrNotFound) {
			return false, nil
		}
		return err == nil && res.Written > 0, err
	})
}

// verify checks that the stream answers, the lineage is this cache's and the
// blob store answers.
func (a *Agent) verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	return cacheOp(a, ctx, req.Namespace, func(h *host.Host) (VerifyResult, error) {
		st, err := h.Status(ctx)
		if err != nil {
			return VerifyResult{}, err
		}
		bl, err := a.cfg.Ports.Blobs(ctx)
		if err != nil {
			return VerifyResult{}, err
		}
		if _, err := bl.Stat(ctx, ledger.DigestOf(nil)); err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return VerifyResult{}, fmt.Errorf("blob store: %w", err)
		}
		out := VerifyResult{Head: st.Head, HWM: st.HWM, Ledger: st.Ledger, UUID: st.UUID,
			Cache: st.Cache, Dirty: len(st.Dirty), Files: st.Files}
		if st.Forked != nil {
			out.Forked = st.Forked.Error()
		}
		return out, nil
	})
}

// own turns swamp's paths into the cache's: with a namespace, swamp's NS/…
// are the cache's …; its paths elsewhere are not this datastore's.
func (a *Agent) own(paths []string) []string {
	if a.cfg.Namespace == "" || paths == nil {
		return paths
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, a.cfg.Namespace+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// changed returns the paths a push checks (nil: all) and what to call once
// it committed them: a running watch's (Config.Watch) dirty set and hints.
//
// Where no watch narrows it, the agent's own dirty set (Agent) gives the
// paths changed since the scan after the last pull (without the hints: the
// set saw those writes), and done acks them to it; with no such scan, nil
// (scan the whole cache). Under hostMu, the cache open.
func (a *Agent) changed(ctx context.Context, hints []string) ([]string, func()) {
	root := a.h.Dir().Root()
	snap, changed, err := a.cfg.Watch.ForCommit(ctx, root, hints)
	if err != nil {
		a.cfg.Logger.Warn("scanning the cache: the watch's dirty set is unavailable", "err", err)
	}
	// Acks a full scan too, to a watch that answered.
	scanAll := func() {
		if err := a.cfg.Watch.AckCommit(ctx, root, snap, changed); err != nil {
			a.cfg.Logger.Warn("the watch did not take the commit's ack (the next commit checks these paths again)", "err", err)
		}
	}
	if changed != nil {
		return changed, scanAll
	}
	if a.baseSnap == nil {
		return nil, scanAll
	}
	own, err := a.watch.Snapshot(ctx)
	if err != nil || !own.Trusted || own.Epoch != a.baseSnap.Epoch {
		return nil, scanAll
	}
	// The set saw swamp's writes too: the hints (data directories holding
	// every version) would only add files to check.
	ownChanged := dirty.Merge(own.Paths, a.base)
	return ownChanged, func() {
		a.watch.Ack(own.Epoch, own.Seq, false, ownChanged)
		a.base = nil
	}
}

// healedLines says, for people, what a pull that healed the cache did (the
// ledger had lost commits it applied: a server restored from an older
// backup).
func healedLines(hd *host.Healed, rn swamp.Renumbered) []string {
	out := []string{fmt.Sprintf("the ledger had lost commits this host applied (%v): this host's copy of them is republished, nothing deleted", hd.Fork)}
	if n := len(hd.Republish); n > 0 {
		out = append(out, fmt.Sprintf("%d files republished", n))
	}
	for _, m := range rn.Duplicates {
		out = append(out, fmt.Sprintf("%s: version %d is already in the ledger as version %d (republished by another host)", m.Data, m.From, m.To))
	}
	if len(hd.Kept) > 0 {
		out = append(out, fmt.Sprintf("%d files the ledger has written since are kept under %s: %s", len(hd.Kept), hd.KeptIn, strings.Join(hd.Kept[:min(len(hd.Kept), 5)], ", ")))
	}
	if len(hd.Gone) > 0 {
		out = append(out, fmt.Sprintf("%d files were synced here as metadata only and their content is gone: a host that holds them republishes them", len(hd.Gone)))
	}
	return out
}

package dirty

import (
	"context"
	"errors"
	"log/slog"
)

// Round is one commit's handshake with the cache's watcher, the one every
// committer runs (commit, exec, the swamp agent): Begin asks which paths the
// commit must check (ForCommit), and after the commit succeeded Ack tells the
// watcher what it covered (AckCommit). Without a watcher, or with a set it
// cannot vouch for, Changed is nil: the commit scans the whole cache, and Ack
// acknowledges a full scan.
type Round struct {
	root    string
	snap    *Snapshot
	log     *slog.Logger
	Changed []string // the paths the commit must check; nil: scan the whole cache
}

// Begin asks the watcher of the cache at root for the paths a commit must
// check, hints (paths the caller changed) included, and logs to log (nil:
// discard) why the commit scans the whole cache when it must.
func Begin(ctx context.Context, root string, hints []string, log *slog.Logger) *Round {
	log = orDiscard(log)
	snap, changed, why, err := ForCommit(ctx, root, hints)
	switch {
	case err != nil:
		log.Warn("scanning the cache: "+why, "err", err)
	case changed == nil:
		log.Debug("scanning the cache", "reason", why)
	case len(changed) == 0:
		log.Debug("checking the dirty set: nothing changed since the last full scan")
	default:
		log.Debug("checking the dirty set", "paths", len(changed), "hints", len(hints))
	}
	return &Round{root: root, snap: snap, log: log, Changed: changed}
}

// Ack acknowledges a successful commit to the watcher. A commit scoped to
// partitions (scoped) covered only some of the paths: nothing is acked, and
// the next commit checks them again. A failed ack only costs that.
func (r *Round) Ack(ctx context.Context, scoped bool) {
	if err := AckCommit(ctx, r.root, r.snap, r.Changed, scoped); err != nil {
		r.log.Warn("the watch did not take the commit's ack (the next commit checks these paths again)", "err", err)
	}
}

// Untrust tells the watcher of the cache at root, if one runs, that its set
// cannot vouch for the cache until the next full scan (a rebuild replaced the
// index without the files).
func Untrust(ctx context.Context, root, reason string, log *slog.Logger) {
	if err := NewClient(root).Untrust(ctx, reason); err != nil && !errors.Is(err, ErrNoWatcher) {
		orDiscard(log).Warn("could not tell the watch its dirty set is stale; stop and start it before the next commit", "err", err)
	}
}

// Start runs a Watcher of the cache at root (Run, serving its socket) until
// the returned stop is called. Without one (not Linux, another watch runs, no
// inotify) commits scan the cache, as they always may: Start only logs why.
func Start(ctx context.Context, root string, log *slog.Logger) (stop func()) {
	log = orDiscard(log)
	w, err := New(Config{Root: root, Logger: log})
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, ErrUnsupported) {
			level = slog.LevelDebug
		}
		log.Log(ctx, level, "no dirty set: commits scan the whole cache", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			log.Warn("no dirty set: commits scan the whole cache", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

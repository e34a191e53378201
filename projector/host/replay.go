package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// ReplayConfig says what Replay materialises, and where.
type ReplayConfig struct {
	Log   ledger.CommitLog
	Blobs *ledger.Bucket
	// Snapshots is the bucket holding snapshots; nil means Blobs (snapshots
	// live beside the blobs).
	Snapshots *ledger.Bucket
	// Into is the directory to write the files into; it must not exist or be empty.
	Into string
	// To is the seq to materialise: the tree is the datastore as it was after the
	// last commit completed at or below To.
	To ledger.Seq
	// Partitions, when set, limits the tree to these partitions.
	Partitions []string
	// Logger receives warnings (skipped snapshots); nil discards.
	Logger *slog.Logger
	// Parallel bounds concurrent blob fetches; 0 means 16.
	Parallel int
	// Progress, when set, is called as events are replayed and files written.
	Progress func(Progress)
}

// ReplayResult says what Replay materialised.
type ReplayResult struct {
	Seq         ledger.Seq `json:"seq"`      // the commit boundary the tree is at
	Snapshot    ledger.Seq `json:"snapshot"` // the snapshot it started from (0: the log alone)
	SnapshotKey string     `json:"snapshotKey,omitempty"`
	Skipped     []string   `json:"skipped,omitempty"` // snapshots that did not read back
	Events      uint64     `json:"events"`            // events replayed after the snapshot
	Files       int        `json:"files"`
	Bytes       int64      `json:"bytes"`
	Partitions  int        `json:"partitions"`
}

// Replay materialises the datastore as it was at a commit seq (time travel, for
// audits and debugging): from the best snapshot at or below To (the newest that
// reads back and after which the log holds every event up to To — or one at To
// exactly), plus the events after it replayed in memory (snapshot.Build), then
// every file of the resulting index is fetched (verified) into Into. The tree
// holds only the datastore's files: no state, no index, so it is not a cache
// (use Rebuild for one).
func Replay(ctx context.Context, cfg ReplayConfig) (ReplayResult, error) {
	var res ReplayResult
	if cfg.Log == nil || cfg.Blobs == nil || cfg.Into == "" || cfg.To == 0 {
		return res, fmt.Errorf("replay: log, blob store, a directory and a seq are required: %w", ledger.ErrInvalid)
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	objs := cfg.Snapshots
	if objs == nil && cfg.Blobs != nil {
		objs = cfg.Blobs
	}
	if err := emptyDir(cfg.Into); err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("replay: read ledger info: %w", err)
	}
	b, floor, err := snapshot.Floor(ctx, cfg.Log)
	if err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}
	if cfg.To > b.Last {
		return res, fmt.Errorf("replay to seq %d: the log ends at seq %d: %w", cfg.To, b.Last, ledger.ErrInvalid)
	}
	var base *snapshot.Snapshot
	if objs != nil {
		s, si, err := snapshot.Select(ctx, cfg.Log, objs, info.UUID,
			func(i snapshot.Info) bool { return i.Seq == cfg.To || i.Seq < cfg.To && i.Seq+1 >= floor },
			func(i snapshot.Info, err error) {
				lg.Warn("skipping a snapshot that is not attested or does not read back; trying an older one", "key", i.Key, "err", err)
				res.Skipped = append(res.Skipped, i.Key)
			})
		switch {
		case err == nil:
			base, res.Snapshot, res.SnapshotKey = s, s.Seq, si.Key
		case !errors.Is(err, ledger.ErrNotFound):
			return res, fmt.Errorf("replay: %w", err)
		}
	}
	if base == nil && floor > 1 {
		return res, fmt.Errorf("replay to seq %d: no usable snapshot at or below it: %w", cfg.To, &ledger.TruncatedError{From: 1, First: floor})
	}
	bc := snapshot.BuildConfig{Log: cfg.Log, Blobs: cfg.Blobs, Base: base, To: cfg.To}
	if cfg.Progress != nil {
		bc.Progress = func(p snapshot.BuildProgress) {
			cfg.Progress(Progress{Phase: "replay", Events: p.Events, EventsTotal: p.Total})
		}
	}
	var entries []snapshot.Entry
	if len(cfg.Partitions) > 0 {
		p, err := snapshot.BuildPartial(ctx, bc, cfg.Partitions)
		if err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
		entries, res.Seq, res.Partitions = p.Entries, p.Through, len(p.Marks)
	} else {
		s, err := snapshot.Build(ctx, bc)
		if err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
		entries, res.Seq, res.Partitions = s.Entries, s.Seq, len(s.Marks)
	}
	res.Events = uint64(cfg.To - res.Snapshot)
	if err := materialize(ctx, cfg, entries, &res); err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}
	return res, nil
}

// emptyDir checks that dir does not exist or is an empty directory.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%s is not empty: %w", dir, ledger.ErrInvalid)
	}
	return nil
}

// ShadowedDir holds, in a replayed tree, the files a directory of the same
// name shadows (projector.Core.Shadowed), each under its path escaped to one
// name (url.PathEscape: "a/b" is "a%2Fb"), so that nothing committed is left
// out of the tree.
const ShadowedDir = ".syncledger-shadowed"

// ShadowedName is where a replayed tree holds the shadowed file at path.
func ShadowedName(path string) string { return ShadowedDir + "/" + url.PathEscape(path) }

// materialize writes every file of entries into cfg.Into, in parallel,
// verified; a shadowed file goes under ShadowedDir.
func materialize(ctx context.Context, cfg ReplayConfig, entries []snapshot.Entry, res *ReplayResult) error {
	dir, err := cachefs.Open(cfg.Into)
	if err != nil {
		return err
	}
	defer dir.Close()
	p := Progress{Phase: "write", FilesTotal: len(entries)}
	paths := make([]string, len(entries))
	for i, e := range entries {
		p.BytesTotal += e.Size
		paths[i] = e.Path
	}
	shadowed := map[string]bool{}
	for _, p := range projector.ShadowedPaths(paths) {
		shadowed[p] = true
	}
	var mu sync.Mutex // res, p
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallel)
	st := dir.NewStater()
	for i, e := range entries {
		if shadowed[e.Path] {
			paths[i] = ShadowedName(e.Path)
		}
		g.Go(func() error {
			fi, err := fetch(gctx, cfg.Blobs, st, paths[i], &projector.File{SHA256: e.SHA256, Size: e.Size, Mode: e.Mode})
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			res.Files++
			res.Bytes += fi.Size
			p.Files, p.Bytes = res.Files, res.Bytes
			if cfg.Progress != nil {
				cfg.Progress(p)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Each file's content was fsynced before its rename: only the
	// directories on the paths remain.
	if err := dir.Flush(nil, paths, cfg.Parallel); err != nil {
		return err
	}
	// The tree is the datastore's files only: drop cachefs's temp directory.
	return os.RemoveAll(filepath.Join(dir.Root(), ledger.StateDir))
}

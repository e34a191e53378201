package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/syncledger/syncledger/ledger"
)

// Config is what Take, and package maintain's Retain, Run and GC, work on: a
// ledger's log, its blob store and the object store holding the blobs and the
// snapshots.
type Config struct {
	Log     ledger.CommitLog
	Blobs   *ledger.Bucket
	Objects *ledger.Bucket
	// Logger receives warnings (skipped snapshots) and progress; nil discards.
	Logger *slog.Logger
	// Progress, when set, is called while events are replayed.
	Progress func(BuildProgress)
}

// Logs returns the Logger, or one that discards.
func (c Config) Logs() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Check reports a Config missing the log, the blob store or the object store.
func (c Config) Check() error {
	if c.Log == nil || c.Blobs == nil || c.Objects == nil {
		return fmt.Errorf("snapshot: log, blob store and object store are required: %w", ledger.ErrInvalid)
	}
	return nil
}

// TakeOptions select how Take builds the snapshot.
type TakeOptions struct {
	// Full replays the whole log instead of starting from the newest usable
	// snapshot (a check that the log alone yields the same state).
	Full bool
}

// TakeResult says what Take did.
type TakeResult struct {
	Info     Info       `json:"snapshot"`          // the snapshot written (or the newest one, when UpToDate)
	Base     ledger.Seq `json:"base"`              // seq of the snapshot it started from; 0: the log alone
	Events   uint64     `json:"events"`            // events replayed
	Entries  int        `json:"entries"`           // files in the snapshot
	Marks    int        `json:"partitions"`        // partitions in the snapshot
	Bytes    int64      `json:"bytes"`             // content bytes the snapshot's files hold
	UpToDate bool       `json:"upToDate"`          // no commit since the newest snapshot: nothing written
	Skipped  []string   `json:"skipped,omitempty"` // snapshots that did not read back
}

// Take writes a snapshot of the ledger at the log's last commit boundary: the
// newest usable snapshot (one the log still holds every later event of) plus the
// events after it, replayed in memory (Build). It needs no cache. A snapshot
// becomes visible only once complete.
func Take(ctx context.Context, cfg Config, opt TakeOptions) (TakeResult, error) {
	var res TakeResult
	if err := cfg.Check(); err != nil {
		return res, err
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("take snapshot: read ledger info: %w", err)
	}
	b, floor, err := Floor(ctx, cfg.Log)
	if err != nil {
		return res, fmt.Errorf("take snapshot: %w", err)
	}
	if b.Last == 0 {
		res.UpToDate = true // an empty ledger: nothing to snapshot
		return res, nil
	}
	var base *Snapshot
	if !opt.Full {
		s, si, err := Select(ctx, cfg.Log, cfg.Objects, info.UUID, func(i Info) bool { return i.Seq+1 >= floor && i.Seq <= b.Last },
			func(i Info, err error) {
				res.Skipped = append(res.Skipped, i.Key)
				cfg.Logs().Warn("skipping unreadable snapshot", "key", i.Key, "err", err)
			})
		switch {
		case err == nil:
			base, res.Base = s, s.Seq
			if s.Seq == b.Last {
				res.Info, res.UpToDate = si, true
				res.Entries, res.Marks, res.Bytes = len(s.Entries), len(s.Marks), s.Bytes()
				return res, nil
			}
		case !errors.Is(err, ledger.ErrNotFound):
			return res, fmt.Errorf("take snapshot: %w", err)
		}
	}
	if base == nil && floor > 1 {
		te := &ledger.TruncatedError{From: 1, First: floor}
		if wrong, err := WrongBound(ctx, cfg.Log); err == nil && wrong > 0 {
			return res, fmt.Errorf("take snapshot: no usable snapshot: %w", &WrongBoundError{Bound: wrong, Err: te})
		}
		return res, fmt.Errorf("take snapshot: no usable snapshot, and the log no longer holds seqs below %d: %w", floor, te)
	}
	s, err := Build(ctx, BuildConfig{Log: cfg.Log, Blobs: cfg.Blobs, Base: base, To: b.Last, Progress: cfg.Progress})
	if err != nil {
		return res, fmt.Errorf("take snapshot: %w", err)
	}
	res.Events = uint64(b.Last - res.Base)
	res.Entries, res.Marks, res.Bytes = len(s.Entries), len(s.Marks), s.Bytes()
	if s.Seq == res.Base && base != nil {
		res.UpToDate = true // only a partly stored commit since
		return res, nil
	}
	if res.Info, err = Put(ctx, cfg.Log, cfg.Objects, s); err != nil {
		return res, fmt.Errorf("take snapshot: %w", err)
	}
	cfg.Logs().Info("snapshot written", "key", res.Info.Key, "seq", s.Seq, "files", len(s.Entries), "partitions", len(s.Marks))
	return res, nil
}

package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Config is what Take, Retain, Run and GC work on: a ledger's log, its blob store
// and the object store holding the blobs and the snapshots.
type Config struct {
	Log     ledger.CommitLog
	Blobs   ledger.BlobStore
	Objects ledger.ObjectStore
	// Logger receives warnings (skipped snapshots) and progress; nil discards.
	Logger *slog.Logger
	// Progress, when set, is called while events are replayed.
	Progress func(BuildProgress)
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c Config) check() error {
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
	if err := cfg.check(); err != nil {
		return res, err
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("take snapshot: read ledger info: %w", err)
	}
	b, floor, err := Floor(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return res, fmt.Errorf("take snapshot: %w", err)
	}
	if b.Last == 0 {
		res.UpToDate = true // an empty ledger: nothing to snapshot
		return res, nil
	}
	var base *Snapshot
	if !opt.Full {
		s, si, err := Select(ctx, cfg.Objects, info.UUID, func(i Info) bool { return i.Seq+1 >= floor && i.Seq <= b.Last },
			func(i Info, err error) {
				res.Skipped = append(res.Skipped, i.Key)
				cfg.logger().Warn("skipping unreadable snapshot", "key", i.Key, "err", err)
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
		return res, fmt.Errorf("take snapshot: no usable snapshot, and the log no longer holds seqs below %d: %w",
			floor, &ledger.TruncatedError{From: 1, First: floor})
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
	if res.Info, err = Put(ctx, cfg.Objects, s); err != nil {
		return res, fmt.Errorf("take snapshot: %w", err)
	}
	cfg.logger().Info("snapshot written", "key", res.Info.Key, "seq", s.Seq, "files", len(s.Entries), "partitions", len(s.Marks))
	return res, nil
}

// RetainResult says what Retain did.
type RetainResult struct {
	Snapshot ledger.Seq `json:"snapshot"` // the newest intact snapshot's seq
	Before   ledger.Seq `json:"before"`   // events below this seq were dropped (partition heads kept)
	Dropped  uint64     `json:"dropped"`  // events dropped by this run
}

// Retain drops the log's events older than the newest intact snapshot minus
// margin seqs: events with seq ≤ N−margin, N the snapshot's seq, go, except each
// partition's last event (see ledger.Truncater). Nothing newer than the snapshot
// is ever dropped, and nothing is dropped without an intact snapshot. A margin at
// least the distance between two snapshots keeps the previous snapshot usable, so
// a rebuild survives a corrupt newest one.
//
// The bound is recorded beside the snapshots after the log has dropped the
// events (see Retained), so a reader never trusts a bound the log has not reached.
func Retain(ctx context.Context, cfg Config, margin uint64) (RetainResult, error) {
	var res RetainResult
	if err := cfg.check(); err != nil {
		return res, err
	}
	tr, ok := cfg.Log.(ledger.Truncater)
	if !ok {
		return res, fmt.Errorf("retain: the log cannot drop events (no ledger.Truncater): %w", ledger.ErrInvalid)
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("retain: read ledger info: %w", err)
	}
	b, _, err := Floor(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	s, _, err := Select(ctx, cfg.Objects, info.UUID, func(i Info) bool { return i.Seq <= b.Last }, func(i Info, err error) {
		cfg.logger().Warn("skipping unreadable snapshot", "key", i.Key, "err", err)
	})
	if err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	res.Snapshot = s.Seq
	if uint64(s.Seq) <= margin {
		return res, nil
	}
	res.Before = s.Seq + 1 - ledger.Seq(margin)
	if res.Dropped, err = tr.TruncateBefore(ctx, res.Before); err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	old, err := Retained(ctx, cfg.Objects, info.UUID)
	if err != nil && !errors.Is(err, ledger.ErrInvalid) {
		return res, fmt.Errorf("retain: %w", err)
	}
	if res.Before > old {
		if err := putRetained(ctx, cfg.Objects, info.UUID, res.Before); err != nil {
			return res, fmt.Errorf("retain: %w", err)
		}
	}
	cfg.logger().Info("events dropped", "below", res.Before, "snapshot", s.Seq, "dropped", res.Dropped)
	return res, nil
}

// Policy says when Run takes a snapshot: when Every seqs have been appended since
// the newest snapshot, or Interval has passed since it was written (and at least
// one commit came since). Zero fields are off.
type Policy struct {
	Every    uint64
	Interval time.Duration
}

// Due reports whether a snapshot is due, the newest being at seq last written at
// lastAt, with the log at head.
func (p Policy) Due(last ledger.Seq, lastAt time.Time, head ledger.Seq, now time.Time) bool {
	if head <= last {
		return false
	}
	return p.Every > 0 && uint64(head-last) >= p.Every || p.Interval > 0 && now.Sub(lastAt) >= p.Interval
}

// RunConfig configures Run.
type RunConfig struct {
	Config
	Policy Policy
	// Margin, when set, runs Retain with it after each snapshot.
	Margin *uint64
	// Poll is how often the log's head is read; 0 means 10 s.
	Poll time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Taken, when set, is called after each snapshot (and retention) run.
	Taken func(TakeResult, *RetainResult)
}

// Run takes snapshots by policy until ctx is done (it then returns nil). It is
// what a long-running process (serve, watch, a consumer) embeds; a failed
// attempt is logged and retried at the next poll.
func Run(ctx context.Context, cfg RunConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Policy.Every == 0 && cfg.Policy.Interval <= 0 {
		return fmt.Errorf("snapshot policy: give a number of seqs or an interval: %w", ledger.ErrInvalid)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return fmt.Errorf("snapshot policy: read ledger info: %w", err)
	}
	lg := cfg.logger()
	for {
		if err := runOnce(ctx, cfg, info.UUID); err != nil && ctx.Err() == nil {
			lg.Warn("snapshot policy run failed; retrying at the next poll", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.Poll):
		}
	}
}

func runOnce(ctx context.Context, cfg RunConfig, uuid string) error {
	infos, err := List(ctx, cfg.Objects, uuid)
	if err != nil {
		return err
	}
	var last ledger.Seq
	var lastAt time.Time
	if len(infos) > 0 {
		last, lastAt = infos[0].Seq, infos[0].ModTime
	}
	head, err := cfg.Log.LastSeq(ctx)
	if err != nil {
		return err
	}
	if !cfg.Policy.Due(last, lastAt, head, cfg.Now()) {
		return nil
	}
	res, err := Take(ctx, cfg.Config, TakeOptions{})
	if err != nil {
		return err
	}
	var rr *RetainResult
	if cfg.Margin != nil {
		r, err := Retain(ctx, cfg.Config, *cfg.Margin)
		if err != nil {
			return err
		}
		rr = &r
	}
	if cfg.Taken != nil {
		cfg.Taken(res, rr)
	}
	return nil
}

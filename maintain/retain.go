package maintain

import (
	"context"
	"fmt"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// RetainResult says what Retain did.
type RetainResult struct {
	Snapshot ledger.Seq `json:"snapshot"` // the newest intact snapshot's seq
	Before   ledger.Seq `json:"before"`   // events below this seq were dropped (partition heads kept)
	Dropped  uint64     `json:"dropped"`  // events dropped by this run
}

// Retain drops the log's events older than the newest intact snapshot minus
// margin seqs: events with seq ≤ N−margin, N the snapshot's seq, go, except each
// partition's last event (see ledger.CommitLog.TruncateBefore). Nothing newer than the snapshot
// is ever dropped, and nothing is dropped without an intact snapshot. A margin at
// least the distance between two snapshots keeps the previous snapshot usable, so
// a rebuild survives a corrupt newest one.
//
// The bound is attested in the log (ledger.Attestations) after the log has dropped
// the events, so a reader never trusts a bound the log has not reached.
func Retain(ctx context.Context, cfg snapshot.Config, margin uint64) (RetainResult, error) {
	var res RetainResult
	if err := cfg.Check(); err != nil {
		return res, err
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("retain: read ledger info: %w", err)
	}
	b, _, err := snapshot.Floor(ctx, cfg.Log)
	if err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	s, _, err := snapshot.Select(ctx, cfg.Log, cfg.Objects, info.UUID, func(i snapshot.Info) bool { return i.Seq <= b.Last }, func(i snapshot.Info, err error) {
		cfg.Logs().Warn("skipping unreadable snapshot", "key", i.Key, "err", err)
	})
	if err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	res.Snapshot = s.Seq
	if uint64(s.Seq) <= margin {
		return res, nil
	}
	res.Before = s.Seq + 1 - ledger.Seq(margin)
	if res.Dropped, err = cfg.Log.TruncateBefore(ctx, res.Before); err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	if err := cfg.Log.AttestRetention(ctx, res.Before); err != nil {
		return res, fmt.Errorf("retain: %w", err)
	}
	cfg.Logs().Info("events dropped", "below", res.Before, "snapshot", s.Seq, "dropped", res.Dropped)
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
	snapshot.Config
	Policy Policy
	// Margin, when set, runs Retain with it after each snapshot.
	Margin *uint64
	// Poll is how often the log's head is read; 0 means 10 s.
	Poll time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Taken, when set, is called after each snapshot (and retention) run.
	Taken func(snapshot.TakeResult, *RetainResult)
}

// Run takes snapshots by policy until ctx is done (it then returns nil). It is
// what a long-running process (serve, watch, a consumer) embeds; a failed
// attempt is logged and retried at the next poll.
func Run(ctx context.Context, cfg RunConfig) error {
	if err := cfg.Check(); err != nil {
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
	lg := cfg.Logs()
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
	// The newest attested snapshot: one anybody who writes blobs stored (at
	// any seq, a planted one far above the head included) would otherwise
	// make every snapshot look already taken.
	infos, err := snapshot.ListAttested(ctx, cfg.Log, cfg.Objects, uuid)
	if err != nil {
		return err
	}
	var last ledger.Seq
	var lastAt time.Time
	for _, si := range infos {
		if si.Attested {
			last, lastAt = si.Seq, si.ModTime
			break
		}
	}
	head, err := cfg.Log.LastSeq(ctx)
	if err != nil {
		return err
	}
	if !cfg.Policy.Due(last, lastAt, head, cfg.Now()) {
		return nil
	}
	res, err := snapshot.Take(ctx, cfg.Config, snapshot.TakeOptions{})
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

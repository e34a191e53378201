package swamp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp/index"
)

// ControlName is the mirror's position record, _control/syncledger-mirror.json
// in the target's layout (swamp never syncs _control/).
const ControlName = "syncledger-mirror.json"

// ErrForeignLayout: the mirror's target already holds a swamp datastore that
// this mirror did not write. The mirror is the only writer of its layout and
// refuses to take over someone else's.
var ErrForeignLayout = errors.New("target holds a swamp datastore not written by this mirror")

// Mirror defaults.
const (
	DefaultDeleteGrace  = time.Minute
	DefaultPollInterval = time.Second
	DefaultStepLimit    = 1000
	maxRunBackoff       = 30 * time.Second
)

// MirrorConfig configures a Mirror.
type MirrorConfig struct {
	Log    ledger.CommitLog
	Blobs  *ledger.Bucket
	Target *ledger.Bucket // the swamp datastore to keep; its root is swamp's client prefix
	// Namespace writes a namespaced layout ("{ns}/…"); "" for solo mode.
	Namespace string
	// DeleteGrace is how long an object the meta no longer reaches (a deleted
	// file's data object, an emptied shard) stays before it is deleted, so that a
	// reader that read the previous meta can still read it. 0 means
	// DefaultDeleteGrace.
	DeleteGrace time.Duration
	// PollInterval is how often Run asks the log for new commits when idle. 0
	// means DefaultPollInterval.
	PollInterval time.Duration
	// StepLimit bounds the commits one Step mirrors; 0 means DefaultStepLimit.
	StepLimit int
	// Parallel bounds concurrent data uploads; 0 means DefaultParallel.
	Parallel int
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger receives Run's retries; nil discards them.
	Logger *slog.Logger
}

// StepResult says what one Step did.
type StepResult struct {
	Commits   int        // commits mirrored
	Seq       ledger.Seq // the log position mirrored so far
	CommitSeq int64      // the target meta's commitSeq
	Deleted   int        // objects deleted after their grace period
}

type control struct {
	Version   int             `json:"version"`
	Ledger    string          `json:"ledger"`    // the ledger's UUID
	Seq       ledger.Seq      `json:"seq"`       // last log seq mirrored (a commit's last part)
	CommitSeq int64           `json:"commitSeq"` // commitSeq of the last meta written
	UpdatedAt string          `json:"updatedAt"`
	Pending   []pendingDelete `json:"pendingDeletes,omitempty"`
}

type pendingDelete struct {
	Key       string    `json:"key"`
	NotBefore time.Time `json:"notBefore"`
}

// Mirror keeps a swamp v2 layout up to date from a ledger. Use Step (tests,
// one-shot runs) or Run; a Mirror is not safe for concurrent use, and only one
// mirror may write a target.
type Mirror struct {
	cfg    MirrorConfig
	layout index.Layout

	loaded  bool
	lineage string
	ctl     control
	parts   map[string]map[string]index.Entry // partition → rel → entry
	pending map[string]time.Time              // key → not before
}

// NewMirror checks cfg and returns a Mirror. It does no I/O: the target is read
// on the first Step.
func NewMirror(cfg MirrorConfig) (*Mirror, error) {
	if cfg.Log == nil || cfg.Blobs == nil || cfg.Target == nil {
		return nil, fmt.Errorf("swamp mirror: Log, Blobs and Target are required: %w", ledger.ErrInvalid)
	}
	layout, err := index.NewLayout(cfg.Namespace)
	if err != nil {
		return nil, fmt.Errorf("swamp mirror: %w", err)
	}
	if cfg.DeleteGrace <= 0 {
		cfg.DeleteGrace = DefaultDeleteGrace
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StepLimit <= 0 {
		cfg.StepLimit = DefaultStepLimit
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mirror{cfg: cfg, layout: layout}, nil
}

// Run mirrors until ctx is done: a Step whenever the log may have new commits,
// retrying failed steps with backoff. It returns ctx's error, or the error of a
// step that retrying cannot fix (a foreign layout, another ledger's target, a
// truncated log).
func (m *Mirror) Run(ctx context.Context) error {
	backoff := m.cfg.PollInterval
	for {
		res, err := m.Step(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := m.cfg.PollInterval
		switch {
		case err != nil && permanent(err):
			return err
		case err != nil:
			m.cfg.Logger.Warn("swamp mirror step failed; retrying", "err", err, "in", backoff)
			wait, backoff = backoff, min(2*backoff, maxRunBackoff)
		default:
			backoff = m.cfg.PollInterval
			if res.Commits > 0 {
				m.cfg.Logger.Info("swamp mirror", "commits", res.Commits, "seq", res.Seq, "commitSeq", res.CommitSeq)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func permanent(err error) bool {
	return errors.Is(err, ErrForeignLayout) || errors.Is(err, ledger.ErrLineage) ||
		errors.Is(err, ledger.ErrTruncated) || errors.Is(err, ledger.ErrInvalid)
}

// Step mirrors the complete commits the log holds past the mirror's position
// (at most StepLimit), one at a time: each commit's data objects, then the
// shards of the partitions it touched, then _index/_meta.json with commitSeq
// one higher, then the position record. It then deletes the objects whose grace
// period has passed. A failed step leaves the target consistent (a reader sees
// the previous meta and everything it reaches); the next step reloads the
// position from the target and redoes the commit.
func (m *Mirror) Step(ctx context.Context) (StepResult, error) {
	res, err := m.step(ctx)
	if err != nil {
		m.loaded = false // reload from the target: in-memory state may be ahead of it
		return res, fmt.Errorf("swamp mirror: %w", err)
	}
	return res, nil
}

var errStepFull = errors.New("step limit reached")

func (m *Mirror) step(ctx context.Context) (StepResult, error) {
	if !m.loaded {
		if err := m.load(ctx); err != nil {
			return StepResult{}, err
		}
	}
	res := StepResult{Seq: m.ctl.Seq, CommitSeq: m.ctl.CommitSeq}
	last, err := m.cfg.Log.LastSeq(ctx)
	if err != nil {
		return res, err
	}
	if last > m.ctl.Seq {
		err = ledger.ReadCommits(ctx, m.cfg.Log, m.ctl.Seq+1, last, func(commit []ledger.Record) error {
			// Quarantined records (ledger.Quarantine): no reader applies them.
			commit = slices.DeleteFunc(commit, func(r ledger.Record) bool { return r.Skip != nil })
			if len(commit) == 0 {
				return nil
			}
			if err := m.apply(ctx, commit); err != nil {
				return err
			}
			res.Commits++
			res.Seq, res.CommitSeq = m.ctl.Seq, m.ctl.CommitSeq
			if res.Commits >= m.cfg.StepLimit {
				return errStepFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStepFull) {
			return res, err
		}
		// A commit whose last part was not yet readable is left for the next step.
	}
	n, err := m.deleteDue(ctx)
	res.Deleted = n
	if err != nil {
		return res, err
	}
	if n > 0 {
		if err := m.saveControl(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// load reads the position record and the layout it describes from the target.
func (m *Mirror) load(ctx context.Context) error {
	info, err := m.cfg.Log.Info(ctx)
	if err != nil {
		return err
	}
	m.lineage = info.UUID
	m.parts = map[string]map[string]index.Entry{}
	m.pending = map[string]time.Time{}
	b, err := readObject(ctx, m.cfg.Target, m.layout.ControlKey(ControlName))
	if errors.Is(err, ledger.ErrNotFound) {
		for _, key := range []string{m.layout.MetaKey(), m.layout.MonolithKey()} {
			if _, err := m.cfg.Target.StatObject(ctx, key); err == nil {
				return fmt.Errorf("%s exists but %s does not (mirror into an empty location): %w",
					key, m.layout.ControlKey(ControlName), ErrForeignLayout)
			} else if !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
		}
		m.ctl = control{Version: 1, Ledger: m.lineage}
		m.loaded = true
		return nil
	}
	if err != nil {
		return err
	}
	var ctl control
	if err := json.Unmarshal(b, &ctl); err != nil || ctl.Version != 1 {
		return fmt.Errorf("%s: not a version 1 mirror record: %w", m.layout.ControlKey(ControlName), ledger.ErrInvalid)
	}
	if ctl.Ledger != m.lineage {
		return fmt.Errorf("target mirrors ledger %s, not %s: %w", ctl.Ledger, m.lineage, ledger.ErrLineage)
	}
	snap, err := ReadRemote(ctx, m.cfg.Target, m.layout)
	if err != nil {
		return err
	}
	if snap.Format != FormatV2 {
		return fmt.Errorf("%s is missing or not v2 while %s exists (delete the record to mirror from scratch): %w",
			m.layout.MetaKey(), m.layout.ControlKey(ControlName), ledger.ErrInvalid)
	}
	for rel, e := range snap.Entries {
		p := ledger.PartitionKey(rel)
		if m.parts[p] == nil {
			m.parts[p] = map[string]index.Entry{}
		}
		m.parts[p][rel] = e
	}
	// A crash between the meta and the record leaves the meta one ahead.
	ctl.CommitSeq = max(ctl.CommitSeq, snap.CommitSeq)
	for _, pd := range ctl.Pending {
		m.pending[pd.Key] = pd.NotBefore
	}
	m.ctl = ctl
	m.loaded = true
	return nil
}

// apply mirrors one complete commit.
func (m *Mirror) apply(ctx context.Context, recs []ledger.Record) error {
	var writes, deletes []ledger.Entry
	at := recs[0].Event.At
	for _, r := range recs {
		es, err := eventEntries(ctx, m.cfg.Blobs, r.Event)
		if err != nil {
			return fmt.Errorf("seq %d: %w", r.Seq, err)
		}
		for _, e := range es {
			if e.Deleted {
				deletes = append(deletes, e)
			} else {
				writes = append(writes, e)
			}
		}
	}
	// 1. Data: every object a new shard entry will name exists before the shard.
	if err := m.uploadAll(ctx, writes); err != nil {
		return err
	}
	touched := map[string]bool{}
	for _, e := range writes {
		p := ledger.PartitionKey(e.Path)
		touched[p] = true
		if m.parts[p] == nil {
			m.parts[p] = map[string]index.Entry{}
		}
		m.parts[p][e.Path] = index.Entry{Key: e.Path, Size: e.Size, LastModified: index.FormatTime(at), SHA256: e.SHA256.String()}
		delete(m.pending, m.layout.DataKey(e.Path))
	}
	var unlisted []string
	for _, e := range deletes {
		p := ledger.PartitionKey(e.Path)
		if _, ok := m.parts[p][e.Path]; !ok {
			continue
		}
		delete(m.parts[p], e.Path)
		touched[p] = true
		unlisted = append(unlisted, m.layout.DataKey(e.Path))
	}
	// 2. Shards of the touched partitions; an emptied one is unlisted first and
	// deleted after the grace period.
	for _, p := range slices.Sorted(maps.Keys(touched)) {
		if len(m.parts[p]) == 0 {
			delete(m.parts, p)
			unlisted = append(unlisted, m.layout.ShardKey(p))
			continue
		}
		b, err := index.EncodeShard(index.Shard{Entries: m.parts[p]})
		if err != nil {
			return err
		}
		if err := m.put(ctx, m.layout.ShardKey(p), b); err != nil {
			return err
		}
		delete(m.pending, m.layout.ShardKey(p))
	}
	// 3. The meta, one commitSeq higher.
	b, err := index.EncodeMeta(index.Meta{Version: index.MetaV2, Partitions: slices.Collect(maps.Keys(m.parts)), CommitSeq: m.ctl.CommitSeq + 1})
	if err != nil {
		return err
	}
	if err := m.put(ctx, m.layout.MetaKey(), b); err != nil {
		return err
	}
	m.ctl.CommitSeq++
	m.ctl.Seq = recs[len(recs)-1].Seq
	notBefore := m.cfg.Now().Add(m.cfg.DeleteGrace)
	for _, key := range unlisted {
		m.pending[key] = notBefore
	}
	// 4. Objects past their grace, then the position.
	if _, err := m.deleteDue(ctx); err != nil {
		return err
	}
	return m.saveControl(ctx)
}

func (m *Mirror) put(ctx context.Context, key string, b []byte) error {
	return m.cfg.Target.PutObject(ctx, key, bytes.NewReader(b), int64(len(b)))
}

func (m *Mirror) uploadAll(ctx context.Context, writes []ledger.Entry) error {
	g, gctx := errgroup.WithContext(ctx) // the first failure stops the rest
	g.SetLimit(m.cfg.Parallel)
	for _, e := range writes {
		g.Go(func() error { return m.upload(gctx, e) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// upload copies a file's blob (verified as it is read) to its data key.
func (m *Mirror) upload(ctx context.Context, e ledger.Entry) error {
	rc, err := m.cfg.Blobs.Get(ctx, e.SHA256)
	if err != nil {
		return fmt.Errorf("mirror %s: %w", e.Path, err)
	}
	defer rc.Close()
	if err := m.cfg.Target.PutObject(ctx, m.layout.DataKey(e.Path), rc, e.Size); err != nil {
		return fmt.Errorf("mirror %s: %w", e.Path, err)
	}
	return nil
}

// live reports whether the current layout reaches key: a listed shard or the
// data object of an indexed file.
func (m *Mirror) live(key string) bool {
	rel, ok := m.layout.Rel(key)
	if !ok {
		return false
	}
	if p, ok := index.ShardPartition(rel); ok {
		_, listed := m.parts[p]
		return listed
	}
	_, indexed := m.parts[ledger.PartitionKey(rel)][rel]
	return indexed
}

// deleteDue deletes the pending objects whose grace period has passed and that
// the layout does not reach again.
func (m *Mirror) deleteDue(ctx context.Context) (int, error) {
	now := m.cfg.Now()
	n := 0
	for _, key := range slices.Sorted(maps.Keys(m.pending)) {
		if now.Before(m.pending[key]) {
			continue
		}
		if !m.live(key) {
			if err := m.cfg.Target.DeleteObject(ctx, key); err != nil {
				return n, err
			}
		}
		delete(m.pending, key)
		n++
	}
	return n, nil
}

func (m *Mirror) saveControl(ctx context.Context) error {
	m.ctl.UpdatedAt = index.FormatTime(m.cfg.Now())
	m.ctl.Pending = m.ctl.Pending[:0]
	for _, key := range slices.Sorted(maps.Keys(m.pending)) {
		m.ctl.Pending = append(m.ctl.Pending, pendingDelete{Key: key, NotBefore: m.pending[key]})
	}
	b, err := json.MarshalIndent(m.ctl, "", "  ")
	if err != nil {
		return err
	}
	return m.put(ctx, m.layout.ControlKey(ControlName), append(b, '\n'))
}

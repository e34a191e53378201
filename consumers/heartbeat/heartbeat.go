// Package heartbeat records each projector host's position in a key-value
// bucket of its ledger (a ledger.KV), so operators (`syncledger hosts`) and the
// metrics consumer can see every host's HWM and how far behind it is.
//
// On NATS the bucket of ledger <name> is SYNCLEDGER_HOSTS_<name>
// (natsjs: Client.Ledger(name).Heartbeats()), made with the ledger by the admin
// with one value per key, no roll-ups and the ledger stream's replicas. A host's key is its host id escaped to the
// bucket's key alphabet (Key); its value is a Beat as JSON:
//
//	{"host":"web-1","hwm":120,"head":124,"time":"2026-…Z","version":"…","command":"watch"}
//
// hwm is the host's high-water mark, head the log's last seq as the host last
// saw it, time the host's clock when it wrote the beat. Readers get the
// server's time of the write as Beat.Seen ("last seen"), which does not depend
// on the host's clock, and compute how far behind a host is against the log's
// current last seq, not against head.
//
// Publishing is cheap (one key-value put; one publish on NATS, see
// natsjs.BucketKV) and best effort: a host whose beat fails still syncs. A sync publishes once (the CLI skips a beat its cache
// already sent, unchanged, less than 10 s ago); a long-running watch uses a
// Reporter, which publishes after each applied commit (coalesced) and every
// Interval while idle, so "last seen" stays fresh.
//
// Every role that beats may write any key of the bucket, so readers read it
// defensively (Scan): a value that is not a beat, or a beat under a key not
// its host's, is one bad row, skipped and reported, never a failed list; and
// Remove deletes what it names and reads the bucket again before it says so.
package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// DefaultTimeout bounds each beat a Reporter publishes.
const DefaultTimeout = 5 * time.Second

// Key returns a host's key in the bucket: ledger.EscapeToken with "=" for its
// "~" (which keys may not hold), so every host id has its own key.
func Key(host string) string { return strings.ReplaceAll(ledger.EscapeToken(host), "~", "=") }

// Beat is one host's position.
type Beat struct {
	Host    string     `json:"host"`
	HWM     ledger.Seq `json:"hwm"`
	Head    ledger.Seq `json:"head"` // the log's last seq when the host last looked
	Time    time.Time  `json:"time"` // the host's clock
	Version string     `json:"version,omitempty"`
	Command string     `json:"command,omitempty"` // sync, watch, exec …
	// Seen is when the server stored the beat; set by List, not stored.
	Seen time.Time `json:"-"`
}

// Store is a ledger's heartbeat bucket.
type Store struct{ kv ledger.KV }

// NewStore returns the heartbeats kept in kv (memledger.KV in tests,
// the NATS adapter's Ledger.Heartbeats in production).
func NewStore(kv ledger.KV) *Store { return &Store{kv: kv} }

// Put records b as its host's latest beat.
func (s *Store) Put(ctx context.Context, b Beat) error {
	v, err := encode(b)
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, Key(b.Host), v); err != nil {
		return fmt.Errorf("put heartbeat of %q: %w", b.Host, err)
	}
	return nil
}

// encode checks b and returns its stored form, stamped with the time now if it
// has none.
func encode(b Beat) ([]byte, error) {
	if b.Host == "" || len(b.Host) > ledger.MaxHostLen {
		return nil, fmt.Errorf("put heartbeat: host id must be 1-%d bytes: %w", ledger.MaxHostLen, ledger.ErrInvalid)
	}
	if b.Time.IsZero() {
		b.Time = time.Now()
	}
	b.Time = b.Time.UTC()
	v, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("put heartbeat of %q: %w", b.Host, err)
	}
	return v, nil
}

// Bad is a key of the bucket whose value is not a heartbeat. Any role that
// may beat may write any key of the bucket (a key is a subject it may publish
// to), so what the bucket holds is read defensively: a bad value is one row
// skipped and reported, never a failed list.
type Bad struct {
	Key  string    `json:"key"`
	Err  string    `json:"error"`    // why it is not a heartbeat
	Seen time.Time `json:"lastSeen"` // when the server stored it
}

// Listing is what Scan found: every host's latest beat, sorted by host, and
// the keys whose values are not heartbeats, sorted by key.
type Listing struct {
	Beats []Beat
	Bad   []Bad
}

// Scan returns every host's latest beat and the keys holding anything else:
// a value that does not decode as a beat, a beat without a valid host id, or
// a beat stored under a key that is not its host's (Key): a key holds only its
// own host's beat, so no value can stand for another host, or for one host
// twice.
func (s *Store) Scan(ctx context.Context) (Listing, error) {
	es, err := s.kv.List(ctx, "")
	if err != nil {
		return Listing{}, fmt.Errorf("list heartbeats: %w", err)
	}
	l := Listing{Beats: make([]Beat, 0, len(es)), Bad: []Bad{}}
	for _, e := range es {
		b, err := decode(e)
		if err != nil {
			l.Bad = append(l.Bad, Bad{Key: e.Key, Err: err.Error(), Seen: e.Created})
			continue
		}
		l.Beats = append(l.Beats, b)
	}
	slices.SortFunc(l.Beats, func(a, b Beat) int { return strings.Compare(a.Host, b.Host) })
	slices.SortFunc(l.Bad, func(a, b Bad) int { return strings.Compare(a.Key, b.Key) })
	return l, nil
}

// maxValue bounds the value a heartbeat may have: a beat is a few hundred
// bytes.
const maxValue = 4096

// decode reads the beat stored as e.
func decode(e ledger.KVEntry) (Beat, error) {
	var b Beat
	if len(e.Value) > maxValue {
		return b, fmt.Errorf("a value of %d bytes, more than a heartbeat's %d", len(e.Value), maxValue)
	}
	if err := json.Unmarshal(e.Value, &b); err != nil {
		return b, fmt.Errorf("not a heartbeat: %v", err)
	}
	switch {
	case b.Host == "" || len(b.Host) > ledger.MaxHostLen:
		return b, fmt.Errorf("a heartbeat without a host id of 1-%d bytes", ledger.MaxHostLen)
	case Key(b.Host) != e.Key:
		return b, fmt.Errorf("the heartbeat of host %q under another host's key (its own is %s)", b.Host, Key(b.Host))
	}
	b.Seen = e.Created
	return b, nil
}

// List returns every host's latest beat, sorted by host: Scan's beats, without
// the bad rows (callers that show hosts to people use Scan and report those).
func (s *Store) List(ctx context.Context) ([]Beat, error) {
	l, err := s.Scan(ctx)
	return l.Beats, err
}

// Removed says what Remove removed.
type Removed struct {
	Key  string `json:"key"`            // the key removed
	Host string `json:"host,omitempty"` // the host whose beat it held; "" for a bad row
}

// ErrRemoved: a key Remove deleted still holds a value when read back.
var ErrRemoved = errors.New("still there after being removed")

// Remove removes the beat of host name (a host that is gone for good), or the
// value under key name (a row Scan reports as bad), and reads the bucket again
// to check that it is gone. Neither there: an error wrapping ledger.ErrNotFound.
// A value that changed since it was read (the host beat again: it is running)
// is left, with an error wrapping ledger.ErrConflict. A bucket that is a
// KeyPurger (the server's) is purged of the key, which only the admin may
// do; another gets a delete marker.
func (s *Store) Remove(ctx context.Context, name string) (Removed, error) {
	es, err := s.kv.List(ctx, "")
	if err != nil {
		return Removed{}, fmt.Errorf("forget %q: list heartbeats: %w", name, err)
	}
	var found *ledger.KVEntry
	for i, e := range es { // the host's own key first, then a key of that name
		if e.Key == Key(name) || e.Key == name && found == nil {
			found = &es[i]
		}
	}
	if found == nil {
		return Removed{}, fmt.Errorf("forget %q: no heartbeat of that host, and no key of that name (syncledger hosts lists both): %w", name, ledger.ErrNotFound)
	}
	r := Removed{Key: found.Key}
	if b, err := decode(*found); err == nil {
		r.Host = b.Host
	}
	beatAgain := func(err error) error {
		return fmt.Errorf("forget %q: key %s changed since it was read (the host beat again: is it still running? stop it first): %w", name, found.Key, err)
	}
	if p, ok := s.kv.(KeyPurger); ok {
		if err := p.PurgeKey(ctx, found.Key, found.Revision); err != nil {
			return r, fmt.Errorf("forget %q: purge key %s: %w", name, found.Key, err)
		}
	} else if err := s.kv.Delete(ctx, found.Key, found.Revision); err != nil {
		if errors.Is(err, ledger.ErrConflict) {
			return r, beatAgain(err)
		}
		return r, fmt.Errorf("forget %q: delete key %s: %w", name, found.Key, err)
	}
	after, err := s.kv.List(ctx, found.Key)
	if err != nil {
		return r, fmt.Errorf("forget %q: read back key %s: %w", name, found.Key, err)
	}
	for _, e := range after {
		if e.Key == found.Key && e.Revision > found.Revision {
			return r, beatAgain(fmt.Errorf("revision %d after %d: %w", e.Revision, found.Revision, ledger.ErrConflict))
		}
		if e.Key == found.Key {
			return r, fmt.Errorf("forget %q: key %s: %w (revision %d)", name, found.Key, ErrRemoved, e.Revision)
		}
	}
	return r, nil
}

// KeyPurger is a bucket that removes a key's values by a purge, which only
// the admin may send (natsjs.BucketKV): Remove uses it where the bucket has
// it, so that forgetting a host is the admin's, and a delete marker
// otherwise. It removes the values up to revision upTo and keeps a later one.
type KeyPurger interface {
	PurgeKey(ctx context.Context, key string, upTo uint64) error
}

// Forget is Remove without its report.
func (s *Store) Forget(ctx context.Context, name string) error {
	_, err := s.Remove(ctx, name)
	return err
}

// DefaultInterval is how often a Reporter publishes while nothing changes.
const DefaultInterval = 30 * time.Second

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	// KV is the ledger's heartbeat bucket.
	KV ledger.KV
	// Beat is the first beat; Update changes its HWM and Head.
	Beat Beat
	// Position, when set, is asked for the HWM and the log's last seq before each
	// beat (it overrides Update's values): a watch reads its persisted HWM, so
	// an idle host's beat is current even before Update is first called.
	Position func(ctx context.Context) (hwm, head ledger.Seq, err error)
	// Interval between beats while nothing changes; 0 means DefaultInterval.
	Interval time.Duration
	// MinGap is the least time between two beats, so a busy watch publishes a
	// few beats a second at most (updates in between are coalesced); 0 means
	// DefaultMinGap.
	MinGap time.Duration
	// Logger receives failed publishes (at warn level); nil discards.
	Logger *slog.Logger
}

// Reporter publishes a long-running host's beats in the background. Its methods
// never block on the server and never fail: publishing is best effort.
type Reporter struct {
	cfg  ReporterConfig
	log  *slog.Logger
	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	beat  Beat
	store *Store
}

// NewReporter starts a Reporter, which publishes cfg.Beat at once. ctx bounds
// the Reporter's life (as Close does).
func NewReporter(ctx context.Context, cfg ReporterConfig) (*Reporter, error) {
	if cfg.KV == nil {
		return nil, fmt.Errorf("new heartbeat reporter: no bucket: %w", ledger.ErrInvalid)
	}
	if cfg.Beat.Host == "" {
		return nil, fmt.Errorf("new heartbeat reporter: no host id: %w", ledger.ErrInvalid)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = DefaultMinGap
	}
	r := &Reporter{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1), done: make(chan struct{}), beat: cfg.Beat, store: NewStore(cfg.KV)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.kick <- struct{}{}
	r.wg.Go(func() { r.loop(ctx) })
	return r, nil
}

// Update sets the host's HWM and the log's last seq it saw (unless
// Config.Position reads them), and publishes a beat soon (updates in quick
// succession are coalesced).
func (r *Reporter) Update(hwm, head ledger.Seq) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.beat.HWM, r.beat.Head = hwm, max(head, hwm)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Close publishes the last beat and stops the Reporter. A nil Reporter's Update
// and Close do nothing.
func (r *Reporter) Close() {
	if r == nil {
		return
	}
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	r.wg.Wait()
}

func (r *Reporter) loop(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.kick:
		case <-t.C:
		case <-r.done:
			r.publish(context.WithoutCancel(ctx))
			return
		case <-ctx.Done():
			r.publish(context.WithoutCancel(ctx))
			return
		}
		r.publish(ctx)
	}
}

// DefaultMinGap is a Reporter's least time between two beats when
// ReporterConfig.MinGap is 0.
const DefaultMinGap = 200 * time.Millisecond

func (r *Reporter) publish(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	if r.cfg.Position != nil {
		hwm, head, err := r.cfg.Position(ctx)
		if err != nil {
			r.log.Warn("heartbeat: cannot read the position", "err", err)
		} else {
			r.mu.Lock()
			r.beat.HWM, r.beat.Head = hwm, max(head, hwm)
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	b := r.beat
	r.mu.Unlock()
	b.Time = time.Now()
	if err := r.store.Put(ctx, b); err != nil {
		r.log.Warn("heartbeat not published", "err", err)
	}
	select {
	case <-time.After(r.cfg.MinGap):
	case <-r.done:
	case <-ctx.Done():
	}
}

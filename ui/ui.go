// Package ui is syncledger's dashboard: a small web page, its assets embedded in
// the binary, showing one ledger live — the stream head and commit rate, a
// timeline of recent commits (host, partitions, files), the hosts with their
// high-water mark, how far behind they are and when they were last seen, and
// every partition's chain head.
//
// A Dashboard keeps that state in memory: Run reads the ledger's log from the
// first seq from which it is complete (Config.Floor: after snapshot retention
// the log keeps each partition's last event below that bound, with holes
// between) and then follows it (partition heads, recent commits, the commit
// rate); once caught up, it reads the last event of every partition it has not
// seen (Config.Partitions). It polls the log's bounds and the hosts'
// heartbeats every Config.Poll. It reads only: the tooling role of natsauth is enough. Handler
// serves the page, /api/state (the State as JSON) and /api/events (the State as
// server-sent events, sent on every change, at most every Config.MinInterval).
//
// The commit rate is counted from the commits' own times (the committing host's
// clock), so a dashboard started late still shows the rate of the last minutes.
package ui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/ledger"
)

// Defaults of Config.
const (
	DefaultRecent        = 50
	DefaultMaxPartitions = 500
	DefaultPoll          = 2 * time.Second
	DefaultMinInterval   = 500 * time.Millisecond
)

// Host is one host's heartbeat as the dashboard shows it.
type Host struct {
	Host     string     `json:"host"`
	HWM      ledger.Seq `json:"hwm"`
	Behind   uint64     `json:"behind"` // head − hwm, against the head the dashboard knows
	LastSeen time.Time  `json:"lastSeen"`
	Command  string     `json:"command,omitempty"`
	Version  string     `json:"version,omitempty"`
	// Error, when set, says why the value under key Host of the heartbeat
	// bucket is no heartbeat: a bad row, shown as such, counted as no host.
	Error string `json:"error,omitempty"`
}

// Config configures a Dashboard.
type Config struct {
	Log    ledger.CommitLog
	Ledger string // ledger name
	// Hosts returns the hosts' heartbeats (HWM and LastSeen; Behind is computed
	// here); nil shows no hosts.
	Hosts func(ctx context.Context) ([]Host, error)
	// Blobs, when set, is read for the entries of commits kept in manifests.
	Blobs *ledger.Bucket
	// Server, when set, asks the ledger's server whether it takes writes
	// (natsjs.Ledger.ServerState), at every poll: a full server is shown
	// first, with its data directory and the space to free.
	Server func(ctx context.Context) (ledger.ServerState, error)
	// Floor, when set, returns the lowest seq from which the log holds every
	// event (projector/snapshot.Floor); nil means the log's first seq.
	Floor func(ctx context.Context) (ledger.Seq, error)
	// Partitions, when set, lists every partition the log holds events of; the
	// heads of those not read from the floor on are read with PartitionHead.
	Partitions func(ctx context.Context) ([]string, error)
	// Recent is how many commits the timeline keeps; 0 means DefaultRecent.
	Recent int
	// MaxPartitions bounds the partition heads State lists (the most recently
	// extended first); 0 means DefaultMaxPartitions. Partitions counts all.
	MaxPartitions int
	// Poll is how often the head and the hosts are read; 0 means DefaultPoll.
	Poll time.Duration
	// MinInterval is the least time between two events sent to a page; 0 means
	// DefaultMinInterval.
	MinInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger // nil discards
}

// Commit is one commit of the timeline.
type Commit struct {
	Seq        ledger.Seq `json:"seq"`
	Commit     string     `json:"commit"`
	Host       string     `json:"host"`
	At         time.Time  `json:"at"`
	Message    string     `json:"message,omitempty"`
	Partitions []string   `json:"partitions"`
	Files      int        `json:"files"`   // files written
	Deleted    int        `json:"deleted"` // files deleted
	Bytes      int64      `json:"bytes"`
	Paths      []string   `json:"paths"`                // up to 5 paths
	Unresolved int        `json:"unresolved,omitempty"` // manifests not read: their files are not counted
}

// Partition is a partition's chain head.
type Partition struct {
	Partition string     `json:"partition"`
	ModelSeq  uint64     `json:"modelSeq"`
	Seq       ledger.Seq `json:"seq"`
	Host      string     `json:"host"`
	At        time.Time  `json:"at"`
}

// Rate is the commit rate, from the commits' times.
type Rate struct {
	LastMinute   int     `json:"lastMinute"`   // commits in the last 60 s
	Last5Minutes int     `json:"last5Minutes"` // commits in the last 300 s
	PerMinute    float64 `json:"perMinute"`    // Last5Minutes / 5
}

// State is what the page shows.
type State struct {
	Ledger     string     `json:"ledger"`
	UUID       string     `json:"uuid"`
	Head       ledger.Seq `json:"head"`  // the log's last seq
	First      ledger.Seq `json:"first"` // the log's first seq
	Read       ledger.Seq `json:"read"`  // the last seq the dashboard has read
	CaughtUp   bool       `json:"caughtUp"`
	Rate       Rate       `json:"rate"`
	Commits    []Commit   `json:"commits"` // newest first
	Hosts      []Host     `json:"hosts"`
	HostsError string     `json:"hostsError,omitempty"`
	// Server is what the server says of its disk (Config.Server), nil when
	// it was not asked or did not answer.
	Server     *ledger.ServerState `json:"server,omitempty"`
	Partitions []Partition         `json:"partitions"` // most recently extended first, at most MaxPartitions
	// PartitionCount is the number of partitions in the ledger.
	PartitionCount int       `json:"partitionCount"`
	Error          string    `json:"error,omitempty"` // the last error reading the log, until it reads again
	Version        uint64    `json:"version"`         // increases with every change
	Updated        time.Time `json:"updated"`
}

// Dashboard holds a ledger's state for the page.
type Dashboard struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	st       State
	heads    map[string]Partition
	recent   []consumers.Commit // the timeline's commits, oldest first
	summ     map[string]Commit  // summaries by commit id
	times    []time.Time        // commit times within the last 5 minutes, ascending
	coldDone bool               // the heads below the floor were read
	changed  chan struct{}      // closed and replaced on every change
	startEnd ledger.Seq         // the head when the read began: caught up once read
}

// New validates cfg and returns a Dashboard; Run fills it.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Log == nil {
		return nil, fmt.Errorf("new dashboard: no log: %w", ledger.ErrInvalid)
	}
	if err := ledger.ValidateName(cfg.Ledger); err != nil {
		return nil, fmt.Errorf("new dashboard: %w", err)
	}
	if cfg.Recent <= 0 {
		cfg.Recent = DefaultRecent
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, heads: map[string]Partition{}, summ: map[string]Commit{},
		changed: make(chan struct{})}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.st.Ledger = cfg.Ledger
	return d, nil
}

// State returns the current state.
func (d *Dashboard) State() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshot()
}

// snapshot copies the state; d.mu is held.
func (d *Dashboard) snapshot() State {
	st := d.st
	st.Rate = d.rate()
	st.Hosts = slices.Clone(st.Hosts)
	for i := range st.Hosts {
		st.Hosts[i].Behind = 0
		if st.Hosts[i].Error == "" && st.Head > st.Hosts[i].HWM {
			st.Hosts[i].Behind = uint64(st.Head - st.Hosts[i].HWM)
		}
	}
	st.Commits = make([]Commit, 0, len(d.recent))
	for i := len(d.recent) - 1; i >= 0; i-- {
		st.Commits = append(st.Commits, d.summ[d.recent[i].ID])
	}
	parts := make([]Partition, 0, len(d.heads))
	for _, p := range d.heads {
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b Partition) int {
		if c := cmp.Compare(b.Seq, a.Seq); c != 0 {
			return c
		}
		return strings.Compare(a.Partition, b.Partition)
	})
	st.PartitionCount = len(parts)
	st.Partitions = parts[:min(len(parts), d.cfg.MaxPartitions)]
	return st
}

// rate counts the commit times of the last 1 and 5 minutes; d.mu is held.
func (d *Dashboard) rate() Rate {
	now := d.cfg.Now()
	var r Rate
	for _, t := range d.times {
		age := now.Sub(t)
		if age <= 5*time.Minute && age >= -time.Minute { // a host's clock may run a little ahead
			r.Last5Minutes++
			if age <= time.Minute {
				r.LastMinute++
			}
		}
	}
	r.PerMinute = float64(r.Last5Minutes) / 5
	return r
}

// Changed returns a channel closed at the next change of the state.
func (d *Dashboard) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// touch records a change; d.mu is held.
func (d *Dashboard) touch() {
	d.st.Version++
	d.st.Updated = d.cfg.Now().UTC()
	close(d.changed)
	d.changed = make(chan struct{})
}

// Run reads the log and polls the head and the hosts until ctx is done; it
// returns nil then. Errors are shown in the state and retried.
func (d *Dashboard) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { d.poll(ctx) })
	d.follow(ctx)
	wg.Wait()
	return nil
}

func (d *Dashboard) setError(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if d.st.Error != msg {
		d.st.Error = msg
		d.touch()
	}
}

// follow reads the log from its first seq, then follows it; after an error it
// starts again after the last record read, or from the new first seq if the
// log was truncated past it.
func (d *Dashboard) follow(ctx context.Context) {
	wait := time.Second
	for ctx.Err() == nil {
		from, err := d.start(ctx)
		if err == nil {
			g := ledger.Commits{Filtered: true}
			err = d.cfg.Log.Follow(ctx, from, func(r ledger.Record) error {
				cs, err := consumers.Group(&g, r)
				if err != nil {
					return err
				}
				d.add(ctx, r, cs)
				wait = time.Second
				return nil
			})
		}
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("dashboard: reading the log", "err", err)
		d.setError(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// start returns the seq to follow from: after the last record read, or the
// log's first seq (everything is read again) when that is gone.
func (d *Dashboard) start(ctx context.Context) (ledger.Seq, error) {
	if d.st.UUID == "" {
		info, err := d.cfg.Log.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("read ledger settings: %w", err)
		}
		d.mu.Lock()
		d.st.UUID = info.UUID
		d.mu.Unlock()
	}
	b, err := d.cfg.Log.Bounds(ctx)
	if err != nil {
		return 0, fmt.Errorf("read log bounds: %w", err)
	}
	floor := b.First
	if d.cfg.Floor != nil {
		if floor, err = d.cfg.Floor(ctx); err != nil {
			return 0, fmt.Errorf("read the log's floor: %w", err)
		}
		floor = max(floor, b.First)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	from := d.st.Read + 1
	if from < floor {
		// Truncated past what was read (or the first read): start over.
		d.heads, d.recent, d.summ, d.times = map[string]Partition{}, nil, map[string]Commit{}, nil
		d.coldDone = false
		from = floor
	}
	d.startEnd = b.Last
	d.st.First = b.First
	d.st.Head = max(d.st.Head, b.Last)
	d.st.CaughtUp = from > b.Last
	d.st.Error = ""
	d.touch()
	return from, nil
}

// add applies one record and the commits it completes.
func (d *Dashboard) add(ctx context.Context, r ledger.Record, done []consumers.Commit) {
	var sums []Commit
	d.mu.Lock()
	caughtUp := r.Seq >= d.startEnd
	d.mu.Unlock()
	for _, c := range done {
		var blobs *ledger.Bucket
		if caughtUp {
			blobs = d.cfg.Blobs // during the first read, manifests are read at the end
		}
		sums = append(sums, d.summarize(ctx, c, blobs))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A skipped record (a quarantine notice, a lock's fence record or check)
	// heads no partition.
	if e := r.Event; r.Skip == nil {
		if p, ok := d.heads[e.Partition]; !ok || r.Seq > p.Seq {
			d.heads[e.Partition] = Partition{Partition: e.Partition, ModelSeq: e.ModelSeq, Seq: r.Seq, Host: e.Host, At: e.At.UTC()}
		}
	}
	for i, c := range done {
		d.recent = append(d.recent, c)
		d.summ[c.ID] = sums[i]
		if n := len(d.recent) - d.cfg.Recent; n > 0 {
			for _, old := range d.recent[:n] {
				delete(d.summ, old.ID)
			}
			d.recent = slices.Delete(d.recent, 0, n)
		}
		d.times = append(d.times, c.At)
	}
	// Keep only the times the rate counts.
	cut := d.cfg.Now().Add(-5 * time.Minute)
	slices.SortFunc(d.times, func(a, b time.Time) int { return a.Compare(b) })
	i, _ := slices.BinarySearchFunc(d.times, cut, func(a, b time.Time) int { return a.Compare(b) })
	d.times = d.times[i:]
	d.st.Read = r.Seq
	d.st.Head = max(d.st.Head, r.Seq)
	if !d.st.CaughtUp && caughtUp {
		d.st.CaughtUp = true
		d.mu.Unlock()
		d.resolveManifests(ctx)
		d.mu.Lock()
	}
	d.touch()
}

// readColdHeads reads, once per read from the floor, the last event of every
// partition that has none at or above it (Config.Partitions).
func (d *Dashboard) readColdHeads(ctx context.Context) error {
	d.mu.Lock()
	todo := d.cfg.Partitions != nil && d.st.CaughtUp && !d.coldDone
	d.mu.Unlock()
	if !todo {
		return nil
	}
	keys, err := d.cfg.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	for _, k := range keys {
		d.mu.Lock()
		_, seen := d.heads[k]
		d.mu.Unlock()
		if seen {
			continue
		}
		r, err := d.cfg.Log.PartitionHead(ctx, k)
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the head of partition %q: %w", k, err)
		}
		d.mu.Lock()
		if _, ok := d.heads[k]; !ok {
			e := r.Event
			d.heads[k] = Partition{Partition: k, ModelSeq: e.ModelSeq, Seq: r.Seq, Host: e.Host, At: e.At.UTC()}
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	d.coldDone = true
	d.touch()
	d.mu.Unlock()
	return nil
}

func (d *Dashboard) summarize(ctx context.Context, c consumers.Commit, blobs *ledger.Bucket) Commit {
	s, err := consumers.Summarize(ctx, d.cfg.Ledger, c, blobs)
	if err != nil {
		d.log.Warn("dashboard: cannot read a manifest", "commit", c.ID, "err", err)
		s, _ = consumers.Summarize(ctx, d.cfg.Ledger, c, nil)
	}
	out := Commit{Seq: s.Seq, Commit: s.Commit, Host: s.Host, At: s.At, Message: s.Message,
		Partitions: s.Partitions, Files: s.Files, Deleted: s.Deleted, Bytes: s.Bytes,
		Unresolved: len(s.Unresolved), Paths: []string{}}
	for _, e := range s.Entries {
		if len(out.Paths) == 5 {
			break
		}
		out.Paths = append(out.Paths, e.Path)
	}
	return out
}

// resolveManifests reads the manifests of the timeline's commits summarized
// during the first read.
func (d *Dashboard) resolveManifests(ctx context.Context) {
	if d.cfg.Blobs == nil {
		return
	}
	d.mu.Lock()
	var todo []consumers.Commit
	for _, c := range d.recent {
		if d.summ[c.ID].Unresolved > 0 {
			todo = append(todo, c)
		}
	}
	d.mu.Unlock()
	for _, c := range todo {
		s := d.summarize(ctx, c, d.cfg.Blobs)
		d.mu.Lock()
		if _, ok := d.summ[c.ID]; ok {
			d.summ[c.ID] = s
		}
		d.mu.Unlock()
	}
}

// poll reads the head and the hosts every Config.Poll.
func (d *Dashboard) poll(ctx context.Context) {
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		d.pollOnce(ctx)
		if err := d.readColdHeads(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("dashboard: reading partition heads", "err", err)
			d.setError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollOnce reads the log's bounds and the hosts' heartbeats once.
func (d *Dashboard) pollOnce(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.Poll+5*time.Second)
	defer cancel()
	b, berr := d.cfg.Log.Bounds(rctx)
	var hosts []Host
	var herr error
	if d.cfg.Hosts != nil {
		hosts, herr = d.cfg.Hosts(rctx)
	}
	var server *ledger.ServerState
	if d.cfg.Server != nil {
		if st, err := d.cfg.Server(rctx); err == nil {
			server = &st
		} else if ctx.Err() == nil {
			d.log.Debug("dashboard: the server did not say whether it takes writes", "err", err)
		}
	}
	if ctx.Err() != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.st.Server = server
	if berr == nil {
		d.st.Head, d.st.First = max(d.st.Head, b.Last), b.First
	}
	if d.cfg.Hosts != nil {
		if herr != nil && !errors.Is(herr, context.Canceled) {
			d.st.HostsError = herr.Error()
		} else {
			d.st.HostsError = ""
			slices.SortFunc(hosts, func(a, b Host) int { return strings.Compare(a.Host, b.Host) })
			d.st.Hosts = hosts
		}
	}
	d.touch()
}

package consumers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Defaults of Config.
const (
	DefaultMaxDeliver   = 5
	DefaultAckWait      = 30 * time.Second
	DefaultFlushEvery   = 256
	DefaultDrainTimeout = 30 * time.Second
)

// DefaultBackOff are the waits before the 2nd, 3rd, … attempt at a commit.
var DefaultBackOff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}

// Config configures a Runner.
type Config struct {
	// Feed delivers the ledger's messages to the durable consumer and keeps its
	// dead letters; Log is the ledger's log (its lineage and bounds, and the
	// parts of commits a filtered consumer does not receive).
	Feed ledger.Feed
	Log  ledger.CommitLog
	// Name is the durable consumer's name, [A-Za-z0-9_-]{1,64}; one Runner per
	// name at a time.
	Name string
	// Partitions, when set, restricts the consumer to commits touching them (it
	// receives those parts only). A consumer's filter is fixed when it is created.
	Partitions []string
	// Start is where a new consumer begins (StartAll when zero).
	Start Start
	// Handler is called for each commit.
	Handler Handler
	// MaxDeliver is how many times a commit is offered to the handler before it is
	// dead-lettered; 0 means DefaultMaxDeliver.
	MaxDeliver int
	// BackOff are the waits before the 2nd, 3rd, … attempt; the last one repeats.
	// nil means DefaultBackOff.
	BackOff []time.Duration
	// AckWait is how long the feed waits for an acknowledgement before it
	// delivers an event again; the Runner extends it while a handler works.
	// 0 means DefaultAckWait. Used when the consumer is created.
	AckWait time.Duration
	// FlushEvery bounds the commits handled between two Flush calls (and
	// acknowledgements) of a Flusher; 0 means DefaultFlushEvery.
	FlushEvery int
	// DrainTimeout bounds how long a handler call in progress may go on after the
	// Run context is cancelled; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Logger receives retries and dead letters; nil discards.
	Logger *slog.Logger
	// Now is the clock of dead letters; nil means time.Now.
	Now func() time.Time
}

// Stats counts what a Runner did since it was made.
type Stats struct {
	Handled     int64      // commits handled (acknowledged)
	Retries     int64      // failed handler calls that were retried
	DeadLetters int64      // commits dead-lettered
	Seq         ledger.Seq // seq of the last event handled or dead-lettered
}

// Runner runs a Handler on a durable JetStream consumer of a ledger.
type Runner struct {
	cfg     Config
	log     *slog.Logger
	flusher Flusher
	filter  map[string]bool // nil: every partition

	handled, retries, dead atomic.Int64
	seq                    atomic.Uint64
}

// New validates cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	return newRunner(cfg, true)
}

// newRunner validates cfg (its Log and Handler only if it is to run).
func newRunner(cfg Config, run bool) (*Runner, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("new consumer %q: "+format+": %w", append([]any{cfg.Name}, append(args, ledger.ErrInvalid)...)...)
	}
	if err := ValidateName(cfg.Name); err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	switch {
	case cfg.Feed == nil || run && cfg.Log == nil:
		return nil, bad("a feed and a log are required")
	case run && cfg.Handler == nil:
		return nil, bad("no handler")
	case cfg.MaxDeliver < 0 || cfg.FlushEvery < 0 || cfg.AckWait < 0 || cfg.DrainTimeout < 0:
		return nil, bad("negative setting")
	case cfg.Start.kind == 2 && cfg.Start.seq == 0:
		return nil, bad("start at seq 0")
	}
	for _, d := range cfg.BackOff {
		if d < 0 {
			return nil, bad("negative backoff %v", d)
		}
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = DefaultMaxDeliver
	}
	if cfg.BackOff == nil {
		cfg.BackOff = DefaultBackOff
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Runner{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("consumer", cfg.Name)
	if len(cfg.Partitions) > 0 {
		r.filter = make(map[string]bool, len(cfg.Partitions))
		for _, p := range cfg.Partitions {
			if p == "" {
				return nil, bad("empty partition")
			}
			r.filter[p] = true
		}
	}
	r.flusher, _ = cfg.Handler.(Flusher)
	return r, nil
}

// Stats returns the Runner's counters.
func (r *Runner) Stats() Stats {
	return Stats{Handled: r.handled.Load(), Retries: r.retries.Load(), DeadLetters: r.dead.Load(), Seq: ledger.Seq(r.seq.Load())}
}

// partitions returns the filter's partitions, sorted.
func (r *Runner) partitions() []string {
	ps := make([]string, 0, len(r.filter))
	for p := range r.filter {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// feedConsumer is the durable consumer the Runner runs.
func (r *Runner) feedConsumer() ledger.FeedConsumer {
	return ledger.FeedConsumer{Name: r.cfg.Name, Partitions: r.partitions(), Start: r.cfg.Start.feed(), AckWait: r.cfg.AckWait}
}

// errStopped ends a session when the Run context is done mid-commit.
var errStopped = errors.New("stopped")

// Run consumes until ctx is done, then finishes the handler call in progress
// (up to DrainTimeout), flushes, acknowledges what was handled and returns nil.
// It returns an error when it cannot go on: the consumer was deleted, the ledger
// no longer holds the events at the consumer's position (wrapping
// ledger.ErrTruncated), a dead letter could not be stored, Flush failed,
// or the handler stopped it (ErrStop).
func (r *Runner) Run(ctx context.Context) error {
	info, err := r.cfg.Log.Info(ctx)
	if err != nil {
		return fmt.Errorf("consumer %q: read ledger info: %w", r.cfg.Name, err)
	}
	sub, err := r.cfg.Feed.Subscribe(ctx, r.feedConsumer())
	if err != nil {
		return fmt.Errorf("consumer %q: %w", r.cfg.Name, err)
	}
	feed := make(chan ledger.FeedMessage, 128)
	feedErr := make(chan error, 1)
	var wg sync.WaitGroup
	pctx, stop := context.WithCancel(ctx)
	wg.Go(func() {
		for {
			m, err := sub.Next(pctx)
			if err != nil {
				if pctx.Err() == nil {
					feedErr <- fmt.Errorf("consumer %q: %w", r.cfg.Name, err)
				}
				return
			}
			select {
			case feed <- m:
			case <-pctx.Done():
				return
			}
		}
	})
	defer func() {
		stop()
		_ = sub.Close()
		wg.Wait()
	}()

	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	context.AfterFunc(ctx, func() { time.AfterFunc(r.cfg.DrainTimeout, hcancel) })

	s := &session{r: r, sub: sub, rd: ledger.MessageReader{Name: info.Name, UUID: info.UUID}, ctx: ctx, hctx: hctx}
	s.commits = ledger.Commits{Filtered: true}
	if r.filter != nil {
		s.commits.Until = s.lastWanted
	}
	var runErr error
loop:
	for {
		if len(feed) == 0 {
			if runErr = s.flush(); runErr != nil {
				return runErr
			}
		}
		select {
		case <-ctx.Done():
			break loop
		case runErr = <-feedErr:
			break loop
		case m := <-feed:
			if err := s.receive(m); err != nil {
				if !errors.Is(err, errStopped) {
					runErr = err
				}
				break loop
			}
		}
	}
	if err := s.flush(); runErr == nil {
		runErr = err
	}
	return runErr
}

// session is one Run's delivery state. Only Run's goroutine uses it.
type session struct {
	r    *Runner
	sub  ledger.Subscription
	rd   ledger.MessageReader
	ctx  context.Context // Run's: stops waiting
	hctx context.Context // handlers': outlives ctx by DrainTimeout

	quarantined map[ledger.Seq]ledger.Quarantine // as last loaded; nil: not yet

	commits   ledger.Commits       // the grouper (filtered: the consumer may start inside a commit)
	held      []ledger.FeedMessage // the messages of the commit being received
	done      ledger.Seq           // last seq handled or dead-lettered
	toAck     ledger.Seq           // last seq of the last handled commit, not yet acknowledged
	unflushed int                  // commits handled since the last flush
}

func (s *session) receive(m ledger.FeedMessage) error {
	if m.Seq <= s.done || len(s.held) > 0 && m.Seq <= s.held[len(s.held)-1].Seq {
		return nil // delivered again after an ack timeout; a later ack covers it
	}
	if s.skip(m, false) {
		return s.skipped(m)
	}
	rec, err := s.rd.Record(m.Seq, m.Subject, m.Data)
	if err != nil {
		if s.skip(m, true) { // quarantined since the notices were loaded
			return s.skipped(m)
		}
		if err := s.cut(m.Seq); err != nil {
			return err
		}
		return s.deadLetter(nil, []ledger.FeedMessage{m}, m.Seq, err, 0)
	}
	s.held = append(s.held, m)
	return s.commits.Add(rec, s.dispatch)
}

// skip reports whether m is a quarantine notice, a fence record or check
// (ledger.ReservedSubject), or a quarantined message, which every reader
// skips (ledger.Quarantine, ledger.Fence). The notices are loaded once, and
// again when reload is set (m did not decode: a notice may have come since).
func (s *session) skip(m ledger.FeedMessage, reload bool) bool {
	if ledger.ReservedSubject(s.rd.Name, m.Subject) {
		return true
	}
	if s.quarantined == nil || reload {
		qs, err := s.r.cfg.Log.Quarantines(s.hctx)
		if err != nil {
			s.r.log.Warn("cannot read the quarantine notices", "err", err)
			return false
		}
		s.quarantined = qs
	}
	_, ok := s.quarantined[m.Seq]
	return ok
}

// skipped passes over a skipped message: it is acknowledged with the next
// flush, and handlers never see it. A quarantined message or notice is
// logged; a lock's fence record or check (ledger.Fence) is routine.
func (s *session) skipped(m ledger.FeedMessage) error {
	if err := s.cut(m.Seq); err != nil {
		return err
	}
	_, fence := ledger.LockOfFenceSubject(s.rd.Name, m.Subject)
	if !fence && m.Subject != ledger.FenceCheckSubject(s.rd.Name) {
		s.r.log.Info("skipping a quarantined seq", "seq", m.Seq)
	}
	s.done, s.toAck = m.Seq, m.Seq
	s.r.seq.Store(uint64(m.Seq))
	return nil
}

// cut hands over the commit being received, although parts are missing, before
// the message at seq, which is part of no commit: that only happens if the
// server breaks the atomic batch contract, or a part is quarantined.
func (s *session) cut(seq ledger.Seq) error {
	return s.commits.Add(ledger.Record{Seq: seq, Skip: &ledger.Skip{}}, s.dispatch)
}

// lastWanted returns the seq of the last part of rec's commit this consumer
// receives (a filtered consumer's ledger.Commits.Until): the parts after rec
// are read from the log (one atomic batch: consecutive seqs) to see which of
// them match.
func (s *session) lastWanted(rec ledger.Record) (ledger.Seq, error) {
	end := rec.CommitSeq()
	log := s.r.cfg.Log
	for deadline := time.Now().Add(s.r.cfg.AckWait); ; {
		last, err := log.LastSeq(s.hctx)
		if err != nil {
			return 0, fmt.Errorf("consumer %q: %w", s.r.cfg.Name, err)
		}
		if last >= end {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("consumer %q: commit %s at seq %d has parts up to seq %d, but the log ends at %d", s.r.cfg.Name, rec.Event.Commit, rec.Seq, end, last)
		}
		if err := sleep(s.ctx, 10*time.Millisecond); err != nil {
			return 0, errStopped
		}
	}
	want := rec.Seq
	err := log.Read(s.hctx, rec.Seq+1, end, func(r ledger.Record) error {
		if s.r.filter[r.Event.Partition] {
			want = r.Seq
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("consumer %q: read the rest of commit %s: %w", s.r.cfg.Name, rec.Event.Commit, err)
	}
	return want, nil
}

// dispatch offers a received commit (the grouper's) to the handler until it
// succeeds, fails permanently or runs out of attempts.
func (s *session) dispatch(recs []ledger.Record) error {
	r := s.r
	last := recs[len(recs)-1]
	n := 0
	for n < len(s.held) && s.held[n].Seq <= last.Seq {
		n++
	}
	msgs := s.held[:n:n]
	s.held = s.held[n:]
	if r.filter == nil && !last.LastOfCommit() {
		r.log.Warn("commit delivered incomplete", "seq", last.Seq, "commit", last.Event.Commit)
	}
	c, err := NewCommit(recs)
	if err != nil {
		return s.deadLetter(recs, msgs, last.Seq, err, 0)
	}
	for attempt := 1; ; attempt++ {
		stop := s.keepAlive(msgs)
		err := r.cfg.Handler.Handle(s.hctx, c)
		stop()
		if err == nil {
			s.done, s.toAck = last.Seq, last.Seq
			r.seq.Store(uint64(s.done))
			r.handled.Add(1)
			s.unflushed++
			if r.flusher == nil || s.unflushed >= r.cfg.FlushEvery {
				return s.flush()
			}
			return nil
		}
		if s.hctx.Err() != nil {
			return errStopped // shutting down: the commit is delivered again on restart
		}
		if errors.Is(err, ErrStop) {
			if ferr := s.flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("consumer %q: seq %d: %w", r.cfg.Name, c.Seq, err)
		}
		if errors.Is(err, ErrPermanent) || attempt >= r.cfg.MaxDeliver {
			return s.deadLetter(recs, msgs, c.Seq, err, attempt)
		}
		r.retries.Add(1)
		wait := r.cfg.BackOff[min(attempt-1, len(r.cfg.BackOff)-1)]
		r.log.Warn("handler failed; will retry", "seq", c.Seq, "commit", c.ID, "attempt", attempt, "wait", wait, "err", err)
		if err := s.flush(); err != nil {
			return err
		}
		stop = s.keepAlive(msgs)
		err = sleep(s.ctx, wait)
		stop()
		if err != nil {
			return errStopped
		}
	}
}

// keepAlive tells the server, every third of the ack wait, that msgs are still
// being worked on, until stop is called.
func (s *session) keepAlive(msgs []ledger.FeedMessage) (stop func()) {
	every := s.r.cfg.AckWait / 3
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, m := range msgs {
			_ = s.sub.InProgress(m.Seq)
		}
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// flush flushes a Flusher and acknowledges every commit handled so far (the
// consumer acknowledges all events up to the one acknowledged).
func (s *session) flush() error {
	if s.toAck == 0 {
		return nil
	}
	if s.r.flusher != nil && s.unflushed > 0 {
		if err := s.r.flusher.Flush(s.hctx); err != nil {
			return fmt.Errorf("consumer %q: flush: %w", s.r.cfg.Name, err)
		}
	}
	s.unflushed = 0
	seq := s.toAck
	s.toAck = 0
	if err := s.sub.Ack(seq); err != nil {
		return fmt.Errorf("consumer %q: acknowledge up to seq %d: %w", s.r.cfg.Name, s.done, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// Defaults of Config.
const (
	DefaultMaxDeliver   = 5
	DefaultAckWait      = 30 * time.Second
	DefaultPrefetch     = 512
	DefaultFlushEvery   = 256
	DefaultDrainTimeout = 30 * time.Second
	DefaultTimeout      = 5 * time.Second // per request to the server, when ctx has none
)

// DefaultBackOff are the waits before the 2nd, 3rd, … attempt at a commit.
var DefaultBackOff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}

// maxAckPending bounds the events delivered and not yet acknowledged: room for
// the largest commit (ledger.MaxBatch parts) and the prefetch buffers.
const maxAckPending = 4096

// Metadata keys of the durable consumers the Runner creates.
const (
	metaConsumer   = "syncledger.consumer"   // the consumer name: marks a Runner's consumer
	metaPartitions = "syncledger.partitions" // JSON array of the filter's partitions
	metaStart      = "syncledger.start"
)

// Config configures a Runner.
type Config struct {
	// Conn is the NATS connection; Log the ledger's log on it (its lineage and
	// bounds, and the parts of commits a filtered consumer does not receive).
	Conn *nats.Conn
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
	// AckWait is how long the server waits for an acknowledgement before it
	// delivers an event again; the Runner extends it while a handler works.
	// 0 means DefaultAckWait. Used when the consumer is created.
	AckWait time.Duration
	// Prefetch is how many events are pulled ahead; 0 means DefaultPrefetch.
	Prefetch int
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
	js      jetstream.JetStream
	log     *slog.Logger
	flusher Flusher
	filter  map[string]bool // nil: every partition

	handled, retries, dead atomic.Int64
	seq                    atomic.Uint64
}

// New validates cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("new consumer %q: "+format+": %w", append([]any{cfg.Name}, append(args, ledger.ErrInvalid)...)...)
	}
	if err := ValidateName(cfg.Name); err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	switch {
	case cfg.Conn == nil || cfg.Log == nil:
		return nil, bad("a connection and a log are required")
	case cfg.Handler == nil:
		return nil, bad("no handler")
	case cfg.MaxDeliver < 0 || cfg.Prefetch < 0 || cfg.FlushEvery < 0 || cfg.AckWait < 0 || cfg.DrainTimeout < 0:
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
	if cfg.Prefetch == 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	cfg.Prefetch = min(cfg.Prefetch, maxAckPending/4)
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
	js, err := jetstream.New(cfg.Conn, jetstream.WithDefaultTimeout(DefaultTimeout))
	if err != nil {
		return nil, fmt.Errorf("new consumer %q: %w", cfg.Name, err)
	}
	r.js = js
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

// errStopped ends a session when the Run context is done mid-commit.
var errStopped = errors.New("stopped")

// Run consumes until ctx is done, then finishes the handler call in progress
// (up to DrainTimeout), flushes, acknowledges what was handled and returns nil.
// It returns an error when it cannot go on: the consumer was deleted, the ledger
// no longer holds the events at the consumer's position (wrapping
// ledger.ErrTruncated), a dead letter could not be published, or Flush failed.
func (r *Runner) Run(ctx context.Context) error {
	info, err := r.cfg.Log.Info(ctx)
	if err != nil {
		return fmt.Errorf("consumer %q: read ledger info: %w", r.cfg.Name, err)
	}
	if err := r.ensureDeadLetterStream(ctx, info); err != nil {
		return err
	}
	cons, err := r.ensureConsumer(ctx, info.Name)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(r.cfg.Prefetch))
	if err != nil {
		return fmt.Errorf("consumer %q: %w", r.cfg.Name, err)
	}
	feed := make(chan jetstream.Msg, 128)
	feedErr := make(chan error, 1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			m, err := it.Next()
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					feedErr <- fmt.Errorf("consumer %q: %w", r.cfg.Name, err)
				}
				return
			}
			select {
			case feed <- m:
			case <-stop:
				return
			}
		}
	})
	defer func() {
		it.Stop()
		close(stop)
		wg.Wait()
	}()

	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	context.AfterFunc(ctx, func() { time.AfterFunc(r.cfg.DrainTimeout, hcancel) })

	s := &session{r: r, ledgerName: info.Name, uuid: info.UUID, ctx: ctx, hctx: hctx}
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

// ensureConsumer creates the durable consumer or checks the existing one, then
// resets it to its ack floor so that delivery resumes in seq order at the first
// event not acknowledged (events a crashed run held are not left to their ack
// timeout, which would deliver them after later ones).
func (r *Runner) ensureConsumer(ctx context.Context, ledgerName string) (jetstream.Consumer, error) {
	stream := ledger.StreamName(ledgerName)
	var subjects []string
	for _, p := range r.partitions() {
		subjects = append(subjects, ledger.Subject(ledgerName, p))
	}
	b, err := r.cfg.Log.Bounds(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer %q: %w", r.cfg.Name, err)
	}
	cons, err := r.js.Consumer(ctx, stream, r.cfg.Name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if r.cfg.Start.kind == 2 && r.cfg.Start.seq < b.First {
			return nil, fmt.Errorf("consumer %q: start: %w", r.cfg.Name, &ledger.TruncatedError{From: r.cfg.Start.seq, First: b.First})
		}
		parts, _ := json.Marshal(r.partitions())
		cc := jetstream.ConsumerConfig{
			Durable:        r.cfg.Name,
			Description:    "syncledger consumer " + r.cfg.Name,
			DeliverPolicy:  jetstream.DeliverAllPolicy,
			AckPolicy:      jetstream.AckAllPolicy,
			AckWait:        r.cfg.AckWait,
			MaxDeliver:     -1,
			FilterSubjects: subjects,
			MaxAckPending:  maxAckPending,
			ReplayPolicy:   jetstream.ReplayInstantPolicy,
			Metadata: map[string]string{
				metaConsumer: r.cfg.Name, metaPartitions: string(parts), metaStart: r.cfg.Start.String(),
			},
		}
		switch r.cfg.Start.kind {
		case 1:
			cc.DeliverPolicy = jetstream.DeliverNewPolicy
		case 2:
			cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, uint64(r.cfg.Start.seq)
		}
		cons, err = r.js.CreateConsumer(ctx, stream, cc)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = r.js.Consumer(ctx, stream, r.cfg.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %q: %w", r.cfg.Name, err)
	}
	c := cons.CachedInfo().Config
	have := slices.Clone(c.FilterSubjects)
	if c.FilterSubject != "" {
		have = append(have, c.FilterSubject)
	}
	slices.Sort(have)
	switch {
	case c.Metadata[metaConsumer] != r.cfg.Name || c.AckPolicy != jetstream.AckAllPolicy:
		return nil, fmt.Errorf("consumer %q exists on stream %s but was not made by syncledger consume: %w", r.cfg.Name, stream, ledger.ErrInvalid)
	case !slices.Equal(have, subjects):
		return nil, fmt.Errorf("consumer %q exists with partitions %s, not %q (delete it first, or use another name): %w", r.cfg.Name, c.Metadata[metaPartitions], r.partitions(), ledger.ErrInvalid)
	}
	res, err := r.js.ResetConsumer(ctx, stream, r.cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("consumer %q: reset to its ack floor: %w", r.cfg.Name, err)
	}
	if from := ledger.Seq(res.ResetSeq); from < b.First && b.First <= b.Last {
		return nil, fmt.Errorf("consumer %q: %w (delete the consumer and start it again at a seq the ledger holds)", r.cfg.Name, &ledger.TruncatedError{From: from, First: b.First})
	}
	return cons, nil
}

// session is one Run's delivery state. Only Run's goroutine uses it.
type session struct {
	r          *Runner
	ledgerName string
	uuid       string
	ctx        context.Context // Run's: stops waiting
	hctx       context.Context // handlers': outlives ctx by DrainTimeout

	quarantined map[ledger.Seq]bool // seqs quarantined (ledger.Quarantine), as last loaded

	open      *group        // the commit being received
	done      ledger.Seq    // last seq handled or dead-lettered
	toAck     jetstream.Msg // last message of the last handled commit, not yet acknowledged
	unflushed int           // commits handled since the last flush
}

// group is a commit being received: its records and their messages.
type group struct {
	recs []ledger.Record
	msgs []jetstream.Msg
	want ledger.Seq // the commit is complete once this seq is received
}

func (g *group) last() ledger.Seq { return g.recs[len(g.recs)-1].Seq }

func (s *session) receive(m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("consumer %q: %w", s.r.cfg.Name, err)
	}
	seq := ledger.Seq(md.Sequence.Stream)
	if seq <= s.done || s.open != nil && seq <= s.open.last() {
		return nil // delivered again after an ack timeout; a later ack covers it
	}
	if s.skip(m, seq, false) {
		return s.skipped(m, seq)
	}
	rec, err := s.decode(m, seq)
	if err != nil {
		if s.skip(m, seq, true) { // quarantined since the notices were loaded
			return s.skipped(m, seq)
		}
		if err := s.closeOpen(); err != nil {
			return err
		}
		return s.deadLetter(nil, []jetstream.Msg{m}, seq, err, 0)
	}
	if s.open != nil && s.open.recs[0].Event.Commit != rec.Event.Commit {
		if err := s.closeOpen(); err != nil {
			return err
		}
	}
	if s.open == nil {
		want, err := s.lastWanted(rec)
		if err != nil {
			return err
		}
		s.open = &group{want: want}
	}
	g := s.open
	g.recs, g.msgs = append(g.recs, rec), append(g.msgs, m)
	if g.last() < g.want {
		return nil
	}
	s.open = nil
	return s.dispatch(g)
}

// skip reports whether m is a quarantine notice or a quarantined message,
// which every reader skips (ledger.Quarantine). The notices are loaded once,
// and again when reload is set (m did not decode: a notice may have come since).
func (s *session) skip(m jetstream.Msg, seq ledger.Seq, reload bool) bool {
	if m.Subject() == ledger.QuarantineSubject(s.ledgerName) {
		return true
	}
	if s.quarantined == nil || reload {
		qs, err := s.r.cfg.Log.Quarantines(s.hctx)
		if err != nil {
			s.r.log.Warn("cannot read the quarantine notices", "err", err)
			return false
		}
		s.quarantined = map[ledger.Seq]bool{}
		for seq := range qs {
			s.quarantined[seq] = true
		}
	}
	return s.quarantined[seq]
}

// skipped passes over a skipped message: it is acknowledged with the next
// flush, and handlers never see it.
func (s *session) skipped(m jetstream.Msg, seq ledger.Seq) error {
	if err := s.closeOpen(); err != nil {
		return err
	}
	s.r.log.Info("skipping a quarantined seq", "seq", seq)
	s.done, s.toAck = seq, m
	s.r.seq.Store(uint64(seq))
	return nil
}

// closeOpen hands over the open commit although parts are missing, which only
// happens if the server breaks the atomic batch contract.
func (s *session) closeOpen() error {
	g := s.open
	if g == nil {
		return nil
	}
	s.open = nil
	s.r.log.Warn("commit delivered incomplete", "seq", g.last(), "commit", g.recs[0].Event.Commit)
	return s.dispatch(g)
}

// decode turns a message into a record, checking its subject and lineage.
func (s *session) decode(m jetstream.Msg, seq ledger.Seq) (ledger.Record, error) {
	p, err := ledger.PartitionFromSubject(s.ledgerName, m.Subject())
	if err != nil {
		return ledger.Record{}, fmt.Errorf("seq %d: %w", seq, err)
	}
	ev, err := ledger.DecodeEvent(m.Data())
	if err != nil {
		return ledger.Record{}, fmt.Errorf("seq %d: %w", seq, err)
	}
	switch {
	case ev.Partition != p:
		return ledger.Record{}, fmt.Errorf("seq %d: event of partition %q on the subject of %q: %w", seq, ev.Partition, p, ledger.ErrInvalid)
	case ev.Ledger != s.uuid:
		return ledger.Record{}, fmt.Errorf("seq %d: event of ledger %s in ledger %s: %w", seq, ev.Ledger, s.uuid, ledger.ErrLineage)
	}
	return ledger.Record{Seq: seq, Event: ev}, nil
}

// lastWanted returns the seq of the last part of rec's commit this consumer
// receives. Unfiltered, that is the commit's last part. Filtered, the parts after
// rec are read from the log (one atomic batch: consecutive seqs) to see which of
// them match.
func (s *session) lastWanted(rec ledger.Record) (ledger.Seq, error) {
	end := rec.CommitSeq()
	if s.r.filter == nil || rec.Seq >= end {
		return end, nil
	}
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

// dispatch offers a received commit to the handler until it succeeds, fails
// permanently or runs out of attempts.
func (s *session) dispatch(g *group) error {
	r := s.r
	c, err := NewCommit(g.recs)
	if err != nil {
		return s.deadLetter(g.recs, g.msgs, g.last(), err, 0)
	}
	for attempt := 1; ; attempt++ {
		stop := s.keepAlive(g.msgs)
		err := r.cfg.Handler.Handle(s.hctx, c)
		stop()
		if err == nil {
			s.done, s.toAck = g.last(), g.msgs[len(g.msgs)-1]
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
		if errors.Is(err, ErrPermanent) || attempt >= r.cfg.MaxDeliver {
			return s.deadLetter(g.recs, g.msgs, c.Seq, err, attempt)
		}
		r.retries.Add(1)
		wait := r.cfg.BackOff[min(attempt-1, len(r.cfg.BackOff)-1)]
		r.log.Warn("handler failed; will retry", "seq", c.Seq, "commit", c.ID, "attempt", attempt, "wait", wait, "err", err)
		if err := s.flush(); err != nil {
			return err
		}
		stop = s.keepAlive(g.msgs)
		err = sleep(s.ctx, wait)
		stop()
		if err != nil {
			return errStopped
		}
	}
}

// keepAlive tells the server, every third of the ack wait, that msgs are still
// being worked on, until stop is called.
func (s *session) keepAlive(msgs []jetstream.Msg) (stop func()) {
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
			_ = m.InProgress()
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
	if s.toAck == nil {
		return nil
	}
	if s.r.flusher != nil && s.unflushed > 0 {
		if err := s.r.flusher.Flush(s.hctx); err != nil {
			return fmt.Errorf("consumer %q: flush: %w", s.r.cfg.Name, err)
		}
	}
	s.unflushed = 0
	m := s.toAck
	s.toAck = nil
	if err := m.Ack(); err != nil {
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

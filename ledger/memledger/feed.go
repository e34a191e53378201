package memledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Feed is an in-memory ledger.Feed on a Log: durable consumers whose position
// it keeps as JetStream keeps a consumer's ("all up to" acknowledgements, the
// reset to the ack floor when a subscription starts, redelivery after the ack
// wait by the feed's clock) and the dead letters beside them.
//
// Knobs: Disconnect ends every open subscription at once, as a process's
// connection dying does (its acknowledgements are lost with it); Reset moves
// a consumer, as a credential allowed to reset it can.
//
// It is the portable ledger feed (ledger.PortableFeed: every call's context
// and arguments checked once) over an in-memory driver, as the adapter's is
// over its JetStream driver.
type Feed struct {
	*ledger.PortableFeed
	d *feedDriver
}

// Driver returns the driver under the feed, for ledger/drivertest's suite,
// which runs on a portable feed of its own over it.
func (f *Feed) Driver() ledger.FeedDriver { return f.d }

// feedDriver is the in-memory ledger.FeedDriver under Feed.
type feedDriver struct {
	log *logDriver
	now func() time.Time

	mu    sync.Mutex
	cons  map[string]*consumer
	dead  []ledger.StoredDeadLetter
	ids   map[string]bool // consumer/seq of the dead letters stored
	wake  chan struct{}   // closed and replaced by Tick and Disconnect
	epoch int             // bumped by Disconnect: older subscriptions are dead
}

type consumer struct {
	c         ledger.FeedConsumer
	subjects  map[string]bool // nil: every subject
	ackFloor  ledger.Seq
	next      ledger.Seq // the next seq to deliver
	delivered ledger.Seq
	unacked   map[ledger.Seq]*delivery // delivered, above the ack floor
	waiting   int
}

type delivery struct {
	n  int       // times delivered
	at time.Time // last delivered or in progress
}

var (
	_ ledger.Feed       = (*Feed)(nil)
	_ ledger.FeedDriver = (*feedDriver)(nil)
)

// NewFeed returns the feed of log, with no consumers; now is its clock
// (time.Now if nil). A test that moves the clock calls Tick.
func NewFeed(log *Log, now func() time.Time) *Feed {
	if now == nil {
		now = time.Now
	}
	d := &feedDriver{log: log.d, now: now, cons: map[string]*consumer{}, ids: map[string]bool{}, wake: make(chan struct{})}
	return &Feed{PortableFeed: ledger.NewFeed(log.d.info.Name, d), d: d}
}

// Tick wakes waiting subscriptions to look at the clock again (a test moved
// it past an ack wait).
func (f *Feed) Tick() { f.d.tick() }

func (f *feedDriver) tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wakeAll()
}

// Disconnect ends every open subscription: their Next returns an error and
// their acknowledgements are dropped, as when a consumer's process dies.
func (f *Feed) Disconnect() { f.d.disconnect() }

func (f *feedDriver) disconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch++
	f.wakeAll()
}

// Reset moves consumer name so that its next subscription starts at seq (its
// ack floor becomes seq-1), as JetStream's reset to a sequence does.
func (f *Feed) Reset(name string, seq ledger.Seq) error { return f.d.reset(name, seq) }

func (f *feedDriver) reset(name string, seq ledger.Seq) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.cons[name]
	if !ok || seq == 0 {
		return f.fail("reset consumer "+name, ledger.ErrNotFound)
	}
	k.ackFloor, k.next, k.unacked = seq-1, seq, map[ledger.Seq]*delivery{}
	return nil
}

func (f *feedDriver) wakeAll() {
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *feedDriver) fail(op string, err error) error {
	return fmt.Errorf("ledger %q feed %s: %w", f.log.info.Name, op, err)
}

// Create makes the consumer c names if it is missing; see ledger.Feed.
func (f *feedDriver) Create(ctx context.Context, c ledger.FeedConsumer) error {
	f.log.mu.Lock()
	b := f.log.held()
	f.log.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.create(c, b, "create consumer "+c.Name)
	return err
}

// create returns the consumer c names, made if missing on a log holding b.
// f.mu is held.
func (f *feedDriver) create(c ledger.FeedConsumer, b ledger.Bounds, op string) (*consumer, error) {
	if k, ok := f.cons[c.Name]; ok {
		if err := ledger.FilterError(c.Name, k.c.Partitions, c.Partitions); err != nil {
			return nil, err
		}
		return k, nil
	}
	start := b.First
	switch {
	case c.Start.New:
		start = b.Last + 1
	case c.Start.Seq > 0:
		if c.Start.Seq < b.First {
			return nil, f.fail(op, &ledger.TruncatedError{From: c.Start.Seq, First: b.First})
		}
		start = c.Start.Seq
	}
	k := &consumer{c: c, ackFloor: start - 1}
	if len(c.Partitions) > 0 {
		k.subjects = map[string]bool{}
		for _, p := range c.Partitions {
			k.subjects[ledger.Subject(f.log.info.Name, p)] = true
		}
	}
	k.c.Partitions = slices.Clip(slices.Clone(c.Partitions))
	if len(c.Partitions) == 0 {
		k.c.Partitions = nil
	}
	f.cons[c.Name] = k
	return k, nil
}

// Subscribe opens (creating if missing) the consumer c names; see ledger.Feed.
func (f *feedDriver) Subscribe(ctx context.Context, c ledger.FeedConsumer) (ledger.Subscription, error) {
	f.log.mu.Lock()
	b := f.log.held()
	f.log.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	k, err := f.create(c, b, "subscribe "+c.Name)
	if err != nil {
		return nil, err
	}
	// A truncation past the position moves it (JetStream's purge does), then
	// the reset to the ack floor.
	if k.ackFloor+1 < b.First && b.First <= b.Last {
		k.ackFloor = b.First - 1
	}
	k.next, k.unacked = k.ackFloor+1, map[ledger.Seq]*delivery{}
	return &sub{f: f, k: k, epoch: f.epoch, closed: make(chan struct{})}, nil
}

// sub is one Subscription.
type sub struct {
	f      *feedDriver
	k      *consumer
	epoch  int
	once   sync.Once
	closed chan struct{}
}

// live reports whether s may still act; the caller holds f.mu.
func (s *sub) live() bool {
	select {
	case <-s.closed:
		return false
	default:
		return s.epoch == s.f.epoch && s.f.cons[s.k.c.Name] == s.k
	}
}

// Next returns the next message: one whose ack wait ran out first, else the
// next of the filter.
func (s *sub) Next(ctx context.Context) (ledger.FeedMessage, error) {
	f, k := s.f, s.k
	for {
		f.mu.Lock()
		if !s.live() {
			f.mu.Unlock()
			return ledger.FeedMessage{}, f.fail("next", ledger.ErrClosed)
		}
		m, wait, ok := s.take()
		if ok {
			f.mu.Unlock()
			return m, nil
		}
		wake := f.wake
		f.log.mu.Lock()
		grew := f.log.grew
		f.log.mu.Unlock()
		k.waiting++
		f.mu.Unlock()
		err := s.wait(ctx, wait, grew, wake)
		f.mu.Lock()
		k.waiting--
		f.mu.Unlock()
		if err != nil {
			return ledger.FeedMessage{}, f.fail("next", err)
		}
	}
}

// wait waits for the log to grow, a wake-up, the subscription's end, ctx, or
// (d > 0) d to pass.
func (s *sub) wait(ctx context.Context, d time.Duration, grew, wake <-chan struct{}) error {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-grew:
	case <-wake:
	case <-timer:
	case <-s.closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// take delivers a message if one is due, or returns how long until an ack
// wait runs out (0: none is running); the caller holds f.mu.
func (s *sub) take() (ledger.FeedMessage, time.Duration, bool) {
	f, k := s.f, s.k
	now := f.now()
	var wait time.Duration
	for _, seq := range slices.Sorted(maps.Keys(k.unacked)) {
		d := k.unacked[seq]
		left := d.at.Add(k.c.AckWait).Sub(now)
		if left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		if m, ok := f.message(seq); ok {
			d.n, d.at = d.n+1, now
			return m, 0, true
		}
		delete(k.unacked, seq) // truncated meanwhile
	}
	f.log.mu.Lock()
	last := f.log.last()
	f.log.mu.Unlock()
	for ; k.next <= last; k.next++ {
		m, ok := f.message(k.next)
		if !ok || k.subjects != nil && !k.subjects[m.Subject] {
			continue
		}
		k.next++
		k.delivered = max(k.delivered, m.Seq)
		k.unacked[m.Seq] = &delivery{n: 1, at: now}
		return m, 0, true
	}
	return ledger.FeedMessage{}, wait, false
}

// message returns the log's message at seq; false if it does not hold it.
func (f *feedDriver) message(seq ledger.Seq) (ledger.FeedMessage, bool) {
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	m, ok := f.log.at(seq)
	return ledger.FeedMessage{Seq: seq, Subject: m.subject, Data: slices.Clone(m.data)}, ok
}

// Ack acknowledges every message delivered up to seq.
func (s *sub) Ack(seq ledger.Seq) error {
	f, k := s.f, s.k
	f.mu.Lock()
	defer f.mu.Unlock()
	if !s.live() {
		return f.fail(fmt.Sprintf("ack %d", seq), ledger.ErrClosed)
	}
	if _, ok := k.unacked[seq]; !ok {
		return nil // acknowledged already (an ack of all up to a later seq)
	}
	for s := range k.unacked {
		if s <= seq {
			delete(k.unacked, s)
		}
	}
	k.ackFloor = max(k.ackFloor, seq)
	return nil
}

// InProgress restarts the ack wait of the message at seq.
func (s *sub) InProgress(seq ledger.Seq) error {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !s.live() {
		return f.fail(fmt.Sprintf("in progress %d", seq), ledger.ErrClosed)
	}
	if d, ok := s.k.unacked[seq]; ok {
		d.at = f.now()
	}
	return nil
}

// Close ends the subscription.
func (s *sub) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// Positions returns every consumer's position, sorted by name.
func (f *feedDriver) Positions(ctx context.Context) ([]ledger.FeedPosition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dead := map[string]uint64{}
	for _, d := range f.dead {
		dead[d.Consumer]++
	}
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	last := f.log.last()
	out := []ledger.FeedPosition{}
	for _, k := range f.cons {
		p := ledger.FeedPosition{
			Name: k.c.Name, Partitions: slices.Clone(k.c.Partitions), Start: k.c.Start.String(),
			AckFloor: k.ackFloor, Delivered: k.delivered, AckPending: len(k.unacked),
			DeadLetters: dead[k.c.Name], Head: last, Waiting: k.waiting,
		}
		for _, d := range k.unacked {
			if d.n > 1 {
				p.Redelivered++
			}
		}
		for seq := k.next; seq <= last; seq++ {
			if m, ok := f.log.at(seq); ok && (k.subjects == nil || k.subjects[m.subject]) {
				p.Pending++
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b ledger.FeedPosition) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete deletes a consumer; its dead letters stay.
func (f *feedDriver) Delete(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cons[name]; !ok {
		return f.fail("delete consumer "+name, ledger.ErrNotFound)
	}
	delete(f.cons, name)
	f.wakeAll()
	return nil
}

// DeadLetter stores body as consumer's dead letter of seq, once.
func (f *feedDriver) DeadLetter(ctx context.Context, consumer string, seq ledger.Seq, body []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("%s/%d", consumer, seq)
	if f.ids[id] {
		return nil
	}
	f.ids[id] = true
	f.dead = append(f.dead, ledger.StoredDeadLetter{
		Consumer: consumer, Stored: ledger.Seq(len(f.dead) + 1), Received: f.now(), Body: slices.Clone(body),
	})
	return nil
}

// DeadLetters calls fn with consumer's dead letters ("" every consumer's),
// oldest first.
func (f *feedDriver) DeadLetters(ctx context.Context, consumer string, fn func(ledger.StoredDeadLetter) error) error {
	f.mu.Lock()
	dead := slices.Clone(f.dead)
	f.mu.Unlock()
	for _, d := range dead {
		if consumer != "" && d.Consumer != consumer {
			continue
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

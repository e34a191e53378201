package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// Metadata keys of the durable consumers Subscribe creates.
const (
	metaConsumer   = "syncledger.consumer"   // the consumer name: marks a Feed's consumer
	metaPartitions = "syncledger.partitions" // JSON array of the filter's partitions
	metaStart      = "syncledger.start"      // ledger.FeedStart.String()
)

// maxAckPending bounds the events delivered and not yet acknowledged: room for
// the largest commit (ledger.MaxBatch parts) and the prefetch buffers.
const maxAckPending = 4096

// DefaultPrefetch is how many messages a Subscription pulls ahead.
const DefaultPrefetch = 512

// Feed is the ledger.Feed on JetStream: each consumer a durable pull consumer
// of the ledger's stream (acknowledging all up to a seq, filtered by partition
// subjects, marked by its metadata), and the dead letters in a stream of
// their own (DeadLetterStream), made with the ledger (expect.go). Consumers
// are the admin's to create (Create); a Subscribe creates a missing one only
// where the server lets this user. It is the portable ledger feed
// (ledger.PortableFeed: every call's context and arguments checked once)
// over the JetStream driver. It is safe for concurrent use.
type Feed struct {
	*ledger.PortableFeed
	d *feedDriver
}

// Driver returns the JetStream driver under the feed, for ledger/drivertest's
// suite, which runs on a portable feed of its own over it.
func (f *Feed) Driver() ledger.FeedDriver { return f.d }

// feedDriver is the ledger.FeedDriver of a ledger's stream: it is called
// with the arguments and the live context ledger.PortableFeed has checked.
type feedDriver struct {
	l       *logDriver // the ledger's name, stream and JetStream context (not opened)
	watches *watches   // a Client's refusal routing; nil on a bare connection

	mu        sync.Mutex
	dlqExists bool
}

var (
	_ ledger.Feed       = (*Feed)(nil)
	_ ledger.FeedDriver = (*feedDriver)(nil)
)

// NewFeed returns the feed of ledger name on nc. Of opts, WithTimeout applies.
func NewFeed(nc *nats.Conn, name string, opts ...Option) (*Feed, error) {
	l, err := newLog(nc, name, opts)
	if err != nil {
		return nil, err
	}
	d := &feedDriver{l: l}
	return &Feed{PortableFeed: ledger.NewFeed(name, d), d: d}, nil
}

func (f *feedDriver) fail(op string, err error) error {
	return fmt.Errorf("ledger %q feed %s: %w", f.l.name, op, f.l.mapErr(err))
}

// streamInfo returns the ledger stream's info, its settings checked
// (expect.go); ErrNotFound if it is missing.
func (f *feedDriver) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	st, err := f.l.js.Stream(ctx, f.l.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("ledger %q: %w", f.l.name, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if err := ledgerStream(f.l.name).checkConfig(st.CachedInfo().Config); err != nil {
		return nil, err
	}
	return st.CachedInfo(), nil
}

// bounds returns the ledger's first and last seq as the stream info says.
func boundsOf(info *jetstream.StreamInfo) ledger.Bounds {
	s := info.State
	if s.Msgs == 0 {
		return ledger.Bounds{First: ledger.Seq(s.LastSeq + 1), Last: ledger.Seq(s.LastSeq)}
	}
	return ledger.Bounds{First: ledger.Seq(s.FirstSeq), Last: ledger.Seq(s.LastSeq)}
}

// consumerSubjects returns whether a subject is a JetStream API request about
// consumer name of the ledger's stream (its create, info, next, reset), or
// about the dead-letter stream: what a Subscribe sends.
func (f *feedDriver) consumerSubjects(name string) func(string) bool {
	stream, dlq := f.l.stream, DeadLetterStream(f.l.name)
	return func(subject string) bool {
		rest, ok := strings.CutPrefix(subject, apiPrefix)
		if !ok {
			return strings.HasPrefix(subject, "$JS.ACK."+stream+"."+name+".")
		}
		toks := strings.Split(rest, ".")
		switch {
		case len(toks) >= 3 && toks[0] == "STREAM" && toks[len(toks)-1] == dlq:
			return true
		case len(toks) >= 4 && toks[0] == "CONSUMER" && toks[1] == "DURABLE":
			return toks[3] == stream
		case len(toks) >= 4 && toks[0] == "CONSUMER":
			return toks[len(toks)-2] == stream && toks[len(toks)-1] == name ||
				len(toks) >= 5 && toks[2] == stream && toks[3] == name
		case len(toks) == 3 && toks[0] == "CONSUMER":
			return toks[2] == stream // a legacy create
		}
		return false
	}
}

// Subscribe opens the durable consumer, creating it if it is missing and the
// server lets this user (a refusal is a *ledger.NoConsumerError), checks it
// (expect.go consumerExpect), then resets it to its ack floor so that
// delivery resumes in seq order at the first message not acknowledged
// (messages a crashed subscription held are not left to their ack wait,
// which would deliver them after later ones); see ledger.Feed.
func (f *feedDriver) Subscribe(ctx context.Context, c ledger.FeedConsumer) (ledger.Subscription, error) {
	op := "subscribe " + c.Name
	match := f.consumerSubjects(c.Name)
	cons, err := guarded(f.watches, match, ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return f.open(ctx, c, true)
	})
	if nc := (*ledger.NoConsumerError)(nil); errors.As(err, &nc) {
		return nil, err
	}
	if err != nil {
		return nil, f.fail(op, err)
	}
	if err := ledger.FilterError(c.Name, f.filterOf(cons.CachedInfo().Config), c.Partitions); err != nil {
		return nil, err
	}
	it, err := guarded(f.watches, match, ctx, func(ctx context.Context) (jetstream.MessagesContext, error) {
		// A purge past the consumer's position has moved its ack floor
		// already (the server does): the reset resumes at the first message
		// held.
		if _, err := f.l.js.ResetConsumer(ctx, f.l.stream, c.Name); err != nil {
			return nil, fmt.Errorf("reset to its ack floor: %w", err)
		}
		return cons.Messages(jetstream.PullMaxMessages(DefaultPrefetch))
	})
	if err != nil {
		return nil, f.fail(op, err)
	}
	return &subscription{f: f, it: it, held: map[ledger.Seq]jetstream.Msg{}}, nil
}

// Create makes the durable consumer c if it is missing (the admin's: the
// server refuses anyone else) and checks it; see ledger.Feed.
func (f *feedDriver) Create(ctx context.Context, c ledger.FeedConsumer) error {
	cons, err := guarded(f.watches, f.consumerSubjects(c.Name), ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return f.open(ctx, c, false)
	})
	if err != nil {
		return f.fail("create consumer "+c.Name, err)
	}
	return ledger.FilterError(c.Name, f.filterOf(cons.CachedInfo().Config), c.Partitions)
}

// open returns consumer c, made if it is missing, and checked (its filter
// aside: the caller's FilterError). A refused create is a
// *ledger.NoConsumerError when subscribing (the user is not the admin), the
// refusal itself when creating.
func (f *feedDriver) open(ctx context.Context, c ledger.FeedConsumer, subscribing bool) (jetstream.Consumer, error) {
	info, err := f.streamInfo(ctx)
	if err != nil {
		return nil, err
	}
	if err := f.openDeadLetters(ctx); err != nil {
		return nil, err
	}
	js, stream := f.l.js, f.l.stream
	cons, err := js.Consumer(ctx, stream, c.Name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		b := boundsOf(info)
		if c.Start.Seq > 0 && c.Start.Seq < b.First {
			return nil, &ledger.TruncatedError{From: c.Start.Seq, First: b.First}
		}
		cons, err = js.CreateConsumer(ctx, stream, f.consumerConfig(c))
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = js.Consumer(ctx, stream, c.Name)
		}
		if pe := (*ledger.PermissionError)(nil); err != nil && subscribing && errors.As(refusalCause(ctx, err), &pe) {
			return nil, &ledger.NoConsumerError{Name: c.Name, Err: pe}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := consumerExpect(f.l.name, c.Name).check(cons.CachedInfo().Config); err != nil {
		return nil, err
	}
	return cons, nil
}

// consumerConfig is the configuration a consumer is created with (checked by
// expect.go consumerExpect).
func (f *feedDriver) consumerConfig(c ledger.FeedConsumer) jetstream.ConsumerConfig {
	var subjects []string
	for _, p := range c.Partitions {
		subjects = append(subjects, ledger.Subject(f.l.name, p))
	}
	parts, _ := json.Marshal(c.Partitions)
	if c.Partitions == nil {
		parts = []byte("[]")
	}
	cc := jetstream.ConsumerConfig{
		Durable:        c.Name,
		Description:    "syncledger consumer " + c.Name,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckAllPolicy,
		AckWait:        c.AckWait,
		MaxDeliver:     -1,
		FilterSubjects: subjects,
		MaxAckPending:  maxAckPending,
		ReplayPolicy:   jetstream.ReplayInstantPolicy,
		Metadata:       map[string]string{metaConsumer: c.Name, metaPartitions: string(parts), metaStart: c.Start.String()},
	}
	switch {
	case c.Start.New:
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	case c.Start.Seq > 0:
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, uint64(c.Start.Seq)
	}
	return cc
}

// filterOf returns the partitions of a consumer's filter subjects, sorted.
func (f *feedDriver) filterOf(cc jetstream.ConsumerConfig) []string {
	var ps []string
	if cc.FilterSubject != "" {
		cc.FilterSubjects = append(cc.FilterSubjects, cc.FilterSubject)
	}
	for _, s := range cc.FilterSubjects {
		p, err := ledger.PartitionFromSubject(f.l.name, s)
		if err != nil {
			p = s // not a partition's subject: never equal to one
		}
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// subscription is a pull of a durable consumer; held keeps the delivered
// messages not yet acknowledged, by seq, for Ack and InProgress.
type subscription struct {
	f  *feedDriver
	it jetstream.MessagesContext

	mu   sync.Mutex
	held map[ledger.Seq]jetstream.Msg
}

func (s *subscription) Next(ctx context.Context) (ledger.FeedMessage, error) {
	m, err := s.it.Next(jetstream.NextContext(ctx))
	if errors.Is(err, jetstream.ErrMsgIteratorClosed) && !errors.Is(err, nats.ErrConnectionClosed) {
		err = ledger.ErrClosed
	}
	if err != nil {
		return ledger.FeedMessage{}, s.f.fail("next", err)
	}
	md, err := m.Metadata()
	if err != nil {
		return ledger.FeedMessage{}, s.f.fail("next", err)
	}
	seq := ledger.Seq(md.Sequence.Stream)
	s.mu.Lock()
	s.held[seq] = m
	s.mu.Unlock()
	return ledger.FeedMessage{Seq: seq, Subject: m.Subject(), Data: m.Data()}, nil
}

// Ack acknowledges the message at seq, which acknowledges every one before it
// (the consumer's AckAll policy).
func (s *subscription) Ack(seq ledger.Seq) error {
	s.mu.Lock()
	m, ok := s.held[seq]
	for q := range s.held {
		if q <= seq {
			delete(s.held, q)
		}
	}
	s.mu.Unlock()
	if !ok {
		return nil // covered by an ack of a later seq already
	}
	if err := m.Ack(); err != nil {
		return s.f.fail(fmt.Sprintf("acknowledge up to seq %d", seq), err)
	}
	return nil
}

func (s *subscription) InProgress(seq ledger.Seq) error {
	s.mu.Lock()
	m, ok := s.held[seq]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return m.InProgress()
}

func (s *subscription) Close() error {
	s.it.Stop()
	return nil
}

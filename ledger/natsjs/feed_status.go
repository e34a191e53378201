package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/directget"
)

// openDeadLetters checks, once per Feed, that the dead-letter stream exists
// as syncledger makes it (expect.go deadLetterStream): made with the ledger
// by the admin, never by a consumer.
func (f *feedDriver) openDeadLetters(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dlqExists {
		return nil
	}
	_, err := f.deadLetters(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return deadLetterStream(f.l.name).missing()
	}
	if err != nil {
		return fmt.Errorf("dead-letter stream %s: %w", DeadLetterStream(f.l.name), err)
	}
	f.dlqExists = true
	return nil
}

// deadLetters opens the dead-letter stream, its settings checked; a missing
// one is jetstream.ErrStreamNotFound.
func (f *feedDriver) deadLetters(ctx context.Context) (jetstream.Stream, error) {
	st, err := f.l.js.Stream(ctx, DeadLetterStream(f.l.name))
	if err != nil {
		return nil, err
	}
	if err := deadLetterStream(f.l.name).checkConfig(st.CachedInfo().Config); err != nil {
		return nil, err
	}
	return st, nil
}

// DeadLetter publishes body to the consumer's dead-letter subject, once: its
// message id is consumer/seq, within the stream's duplicate window. The
// window is the stream's, not the subject's, and any consumer's user may
// publish under any id: a duplicate answer is taken only when the message
// the server holds under the id is on this consumer's subject (the leader
// says so); one another consumer's user stored there first does not stand
// for this dead letter, which is published again under an id no one can
// know (a random nonce after it).
func (f *feedDriver) DeadLetter(ctx context.Context, consumer string, seq ledger.Seq, body []byte) error {
	op := fmt.Sprintf("dead letter of seq %d", seq)
	if err := f.openDeadLetters(ctx); err != nil {
		return f.fail(op, err)
	}
	subj := DeadLetterSubject(f.l.name, consumer)
	id := consumer + "/" + strconv.FormatUint(uint64(seq), 10)
	for range 2 {
		ack, err := f.l.js.Publish(ctx, subj, body, jetstream.WithMsgID(id), jetstream.WithExpectStream(DeadLetterStream(f.l.name)))
		if err != nil {
			return f.fail(op+" to "+subj, err)
		}
		if !ack.Duplicate {
			return nil
		}
		dg := directget.Stream{Conn: f.l.nc, Name: DeadLetterStream(f.l.name), Timeout: f.l.opts.timeout}
		m, ok, err := dg.At(ctx, ack.Sequence)
		if err != nil {
			return f.fail(op+" to "+subj+": reading the message holding its id", err)
		}
		if ok && m.Subject == subj {
			return nil // this consumer's, stored before
		}
		id = consumer + "/" + strconv.FormatUint(uint64(seq), 10) + "." + newNonce()
	}
	return f.fail(op+" to "+subj, fmt.Errorf("its message id is taken, twice: %w", ledger.ErrConflict))
}

// DeadLetters reads the dead-letters of the consumer (every consumer's when
// empty) in the order stored, by batched direct gets of its subject (one
// leader get per dead letter on a dead-letter stream made before they were
// allowed): no consumer, no state on the server; see ledger.Feed.
func (f *feedDriver) DeadLetters(ctx context.Context, consumer string, fn func(ledger.StoredDeadLetter) error) error {
	subj := DeadLetterSubject(f.l.name, ">")
	if consumer != "" {
		subj = DeadLetterSubject(f.l.name, consumer)
	}
	st, err := f.deadLetters(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return f.fail("dead letters", err)
	}
	info := st.CachedInfo()
	if info.State.Msgs == 0 {
		return nil
	}
	dg := directget.Stream{Conn: f.l.nc, Name: DeadLetterStream(f.l.name), Timeout: f.l.opts.timeout, Leader: !info.Config.AllowDirect}
	prefix := DeadLetterSubject(f.l.name, "")
	var fnErr error
	err = dg.Scan(ctx, subj, info.State.FirstSeq, func(m directget.Msg) error {
		fnErr = fn(ledger.StoredDeadLetter{
			Consumer: strings.TrimPrefix(m.Subject, prefix), Stored: ledger.Seq(m.Seq),
			Received: m.Time, Body: m.Data,
		})
		return fnErr
	})
	if err != nil && err == fnErr {
		return err
	}
	if err != nil {
		return f.fail("dead letters", err)
	}
	return nil
}

// Positions lists the durable consumers Subscribe made (marked by their
// metadata; ordered consumers of readers are not), sorted by name.
func (f *feedDriver) Positions(ctx context.Context) ([]ledger.FeedPosition, error) {
	st, err := f.l.js.Stream(ctx, f.l.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, f.fail("positions", fmt.Errorf("ledger %q: %w", f.l.name, ledger.ErrNotFound))
	}
	if err != nil {
		return nil, f.fail("positions", err)
	}
	head := ledger.Seq(st.CachedInfo().State.LastSeq)
	dead, err := f.deadLetterCounts(ctx)
	if err != nil {
		return nil, f.fail("positions", err)
	}
	out := []ledger.FeedPosition{}
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		c := ci.Config
		if c.Metadata[metaConsumer] != ci.Name {
			continue
		}
		p := ledger.FeedPosition{
			Name: ci.Name, Start: c.Metadata[metaStart],
			AckFloor: ledger.Seq(ci.AckFloor.Stream), Delivered: ledger.Seq(ci.Delivered.Stream),
			Pending: ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered,
			DeadLetters: dead[ci.Name], Head: head, Waiting: ci.NumWaiting,
		}
		_ = json.Unmarshal([]byte(c.Metadata[metaPartitions]), &p.Partitions)
		if len(p.Partitions) == 0 {
			p.Partitions = nil
		}
		out = append(out, p)
	}
	if err := lister.Err(); err != nil {
		return nil, f.fail("positions", err)
	}
	slices.SortFunc(out, func(a, b ledger.FeedPosition) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// deadLetterCounts returns the number of dead letters per consumer.
func (f *feedDriver) deadLetterCounts(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	st, err := f.deadLetters(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	if st.CachedInfo().State.Msgs == 0 {
		return out, nil
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(DeadLetterSubject(f.l.name, ">")))
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	prefix := DeadLetterSubject(f.l.name, "")
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, prefix)] = n
	}
	return out, nil
}

// Delete deletes a durable consumer Subscribe made; its dead letters stay.
func (f *feedDriver) Delete(ctx context.Context, name string) error {
	op := "delete consumer " + name
	c, err := f.l.js.Consumer(ctx, f.l.stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return f.fail(op, ledger.ErrNotFound)
	}
	if err != nil {
		return f.fail(op, err)
	}
	if c.CachedInfo().Config.Metadata[metaConsumer] != name {
		return f.fail(op, fmt.Errorf("not made by syncledger consume: %w", ledger.ErrInvalid))
	}
	if err := f.l.js.DeleteConsumer(ctx, f.l.stream, name); err != nil {
		return f.fail(op, err)
	}
	return nil
}

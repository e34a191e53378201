package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// Position is a consumer's position in its ledger, as operators read it.
type Position struct {
	Name       string   `json:"name"`
	Partitions []string `json:"partitions,omitempty"` // the filter; none: every partition
	Start      string   `json:"start"`                // all, new or a seq, as created
	// AckFloor: every event of the filter up to this seq is handled or
	// dead-lettered.
	AckFloor    ledger.Seq `json:"ackFloor"`
	Delivered   ledger.Seq `json:"delivered"`   // last seq delivered
	Pending     uint64     `json:"pending"`     // events of the filter not yet delivered
	AckPending  int        `json:"ackPending"`  // delivered, not yet acknowledged
	Lag         uint64     `json:"lag"`         // pending + ackPending
	Redelivered int        `json:"redelivered"` // delivered more than once, not yet acknowledged
	DeadLetters uint64     `json:"deadLetters"` // messages on its dead-letter subject
	Head        ledger.Seq `json:"head"`        // the ledger's last seq
	Waiting     int        `json:"waiting"`     // pull requests waiting: > 0 while a Runner is attached
}

// Positions returns the positions of the ledger's consumers made by Runners,
// sorted by name.
func Positions(ctx context.Context, nc *nats.Conn, ledgerName string) ([]Position, error) {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(DefaultTimeout))
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, ledger.StreamName(ledgerName))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("consumer positions: ledger %q: %w", ledgerName, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer positions: %w", err)
	}
	head := ledger.Seq(st.CachedInfo().State.LastSeq)
	dead, err := deadLetterCounts(ctx, js, ledgerName)
	if err != nil {
		return nil, err
	}
	var out []Position
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		c := ci.Config
		if c.Metadata[metaConsumer] != ci.Name {
			continue // not a Runner's (an ordered consumer of a reader, say)
		}
		p := Position{
			Name: ci.Name, Start: c.Metadata[metaStart],
			AckFloor: ledger.Seq(ci.AckFloor.Stream), Delivered: ledger.Seq(ci.Delivered.Stream),
			Pending: ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered,
			Lag: ci.NumPending + uint64(ci.NumAckPending), DeadLetters: dead[ci.Name], Head: head,
			Waiting: ci.NumWaiting,
		}
		_ = json.Unmarshal([]byte(c.Metadata[metaPartitions]), &p.Partitions)
		out = append(out, p)
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("consumer positions: %w", err)
	}
	slices.SortFunc(out, func(a, b Position) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// deadLetterCounts returns the number of dead letters per consumer.
func deadLetterCounts(ctx context.Context, js jetstream.JetStream, ledgerName string) (map[string]uint64, error) {
	out := map[string]uint64{}
	st, err := js.Stream(ctx, DeadLetterStream(ledgerName))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	if st.CachedInfo().State.Msgs == 0 {
		return out, nil
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(DeadLetterSubject(ledgerName, ">")))
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	prefix := DeadLetterSubject(ledgerName, "")
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, prefix)] = n
	}
	return out, nil
}

// Delete deletes a Runner's durable consumer (its position); its dead letters
// stay. A consumer that does not exist is an error wrapping ledger.ErrNotFound.
func Delete(ctx context.Context, nc *nats.Conn, ledgerName, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(DefaultTimeout))
	if err != nil {
		return err
	}
	stream := ledger.StreamName(ledgerName)
	c, err := js.Consumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete consumer %q of ledger %q: %w", name, ledgerName, ledger.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete consumer %q: %w", name, err)
	}
	if c.CachedInfo().Config.Metadata[metaConsumer] != name {
		return fmt.Errorf("delete consumer %q: not made by syncledger consume: %w", name, ledger.ErrInvalid)
	}
	if err := js.DeleteConsumer(ctx, stream, name); err != nil {
		return fmt.Errorf("delete consumer %q: %w", name, err)
	}
	return nil
}

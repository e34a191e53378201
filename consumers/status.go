package consumers

import (
	"context"
	"fmt"

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
	DeadLetters uint64     `json:"deadLetters"` // its dead letters
	Head        ledger.Seq `json:"head"`        // the ledger's last seq
	Waiting     int        `json:"waiting"`     // > 0 while a Runner is attached
}

// Positions returns the positions of the feed's consumers made by Runners,
// sorted by name.
func Positions(ctx context.Context, feed ledger.Feed) ([]Position, error) {
	ps, err := feed.Positions(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer positions: %w", err)
	}
	var out []Position
	for _, p := range ps {
		out = append(out, Position{
			Name: p.Name, Partitions: p.Partitions, Start: p.Start,
			AckFloor: p.AckFloor, Delivered: p.Delivered, Pending: p.Pending, AckPending: p.AckPending,
			Lag: p.Pending + uint64(p.AckPending), Redelivered: p.Redelivered, DeadLetters: p.DeadLetters,
			Head: p.Head, Waiting: p.Waiting,
		})
	}
	return out, nil
}

// Delete deletes a Runner's durable consumer (its position); its dead letters
// stay. A consumer that does not exist is an error wrapping ledger.ErrNotFound.
func Delete(ctx context.Context, feed ledger.Feed, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := feed.Delete(ctx, name); err != nil {
		return fmt.Errorf("delete consumer %q: %w", name, err)
	}
	return nil
}

// Create makes the durable consumer a Runner of cfg runs — its name, filter,
// start and ack wait — without running it: the admin's (syncledger consume
// create), so that a user who may only fetch and acknowledge its own
// consumer (the tooling role) finds it made. cfg.Handler and cfg.Log are not
// needed. An existing consumer with cfg's filter is left as it is.
func Create(ctx context.Context, cfg Config) error {
	r, err := newRunner(cfg, false)
	if err != nil {
		return err
	}
	if err := cfg.Feed.Create(ctx, r.feedConsumer()); err != nil {
		return fmt.Errorf("create consumer %q: %w", cfg.Name, err)
	}
	return nil
}

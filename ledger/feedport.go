package ledger

import (
	"context"
	"fmt"
)

// FeedDriver is one backend's feed under PortableFeed, the portable type
// every Feed handed out is (natsjs's JetStream driver, memledger's): what one
// backend must do, and nothing every backend must do the same way. Its
// methods are Feed's (the same interface: a backend's feed is a Feed
// whose callers promise more), with these promises from PortableFeed:
//
//   - the context is not yet done when a method is called (a driver still
//     honours its end while it works);
//   - Subscribe's and Create's consumer passed CheckFeedConsumer;
//   - Delete's, DeadLetter's and a non-empty DeadLetters' consumer name is
//     a valid one ([A-Za-z0-9_-]{1,64}: IsToken).
//
// A driver does none of those checks again. What only the backend can tell
// — a consumer's existing filter (FilterError), a start the log no longer
// holds — stays the driver's. The conformance suite every driver passes,
// through the PortableFeed over it, is ledger/drivertest's TestFeed.
type FeedDriver interface {
	Feed
}

// PortableFeed is the one portable Feed, over one backend's FeedDriver: it
// checks every call's context and arguments once (a done context, a
// consumer CheckFeedConsumer refuses, a consumer name that is not one: each
// refused, ErrInvalid for the arguments, before the driver is called).
// Callers hold it as a Feed; natsjs.Feed and memledger.Feed embed it beside
// their backend's own operations. It is safe for concurrent use if its
// driver is.
type PortableFeed struct {
	d    FeedDriver
	name string // the ledger's, for errors
}

var _ Feed = (*PortableFeed)(nil)

// NewFeed returns the portable Feed of ledger name over d.
func NewFeed(name string, d FeedDriver) *PortableFeed { return &PortableFeed{d: d, name: name} }

func (f *PortableFeed) fail(op string, err error) error {
	return fmt.Errorf("ledger %q feed %s: %w", f.name, op, err)
}

// live is every operation's preamble: the context not yet done.
func (f *PortableFeed) live(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return f.fail(op, err)
	}
	return nil
}

// consumerName checks a consumer's name as an argument of op.
func (f *PortableFeed) consumerName(op, name string) error {
	if !IsToken(name, 64) {
		return f.fail(op, fmt.Errorf("consumer name %q: want [A-Za-z0-9_-]{1,64}: %w", name, ErrInvalid))
	}
	return nil
}

// Subscribe opens the durable consumer c; see Feed.
func (f *PortableFeed) Subscribe(ctx context.Context, c FeedConsumer) (Subscription, error) {
	if err := CheckFeedConsumer(c); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, f.fail("subscribe "+c.Name, err)
	}
	return f.d.Subscribe(ctx, c)
}

// Create makes the durable consumer c without subscribing; see Feed.
func (f *PortableFeed) Create(ctx context.Context, c FeedConsumer) error {
	if err := CheckFeedConsumer(c); err != nil {
		return err
	}
	if err := f.live(ctx, "create consumer "+c.Name); err != nil {
		return err
	}
	return f.d.Create(ctx, c)
}

// Positions returns the consumers Subscribe made, sorted by name.
func (f *PortableFeed) Positions(ctx context.Context) ([]FeedPosition, error) {
	if err := f.live(ctx, "positions"); err != nil {
		return nil, err
	}
	return f.d.Positions(ctx)
}

// Delete deletes a consumer Subscribe made; see Feed.
func (f *PortableFeed) Delete(ctx context.Context, name string) error {
	op := "delete consumer " + name
	if err := f.consumerName(op, name); err != nil {
		return err
	}
	if err := f.live(ctx, op); err != nil {
		return err
	}
	return f.d.Delete(ctx, name)
}

// DeadLetter stores body as consumer's dead letter of seq; see Feed.
func (f *PortableFeed) DeadLetter(ctx context.Context, consumer string, seq Seq, body []byte) error {
	op := fmt.Sprintf("dead letter of seq %d", seq)
	if err := f.consumerName(op, consumer); err != nil {
		return err
	}
	if err := f.live(ctx, op); err != nil {
		return err
	}
	return f.d.DeadLetter(ctx, consumer, seq, body)
}

// DeadLetters calls fn with the stored dead letters of consumer (every
// consumer's when ""); see Feed.
func (f *PortableFeed) DeadLetters(ctx context.Context, consumer string, fn func(StoredDeadLetter) error) error {
	if consumer != "" {
		if err := f.consumerName("dead letters", consumer); err != nil {
			return err
		}
	}
	if err := f.live(ctx, "dead letters"); err != nil {
		return err
	}
	return f.d.DeadLetters(ctx, consumer, fn)
}

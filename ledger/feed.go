package ledger

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Feed is a ledger's durable, filtered, acknowledged delivery: named consumers
// whose position the feed keeps, each receiving the log's messages (of some
// partitions, or all) in seq order, and a dead letter beside them for what a
// consumer gave up on. consumers.Runner is its one user.
//
// Every method takes a context first; it blocks at most until the context is
// done. Implementations never log and never panic.
type Feed interface {
	// Subscribe opens the durable consumer c.Name, creating it as c says if it
	// does not exist; an existing one keeps its position and its filter, which
	// must be c's (ErrInvalid otherwise: a filter is fixed when the consumer is
	// created; see FilterError). Delivery starts at the first message the
	// consumer has not acknowledged, in seq order (messages a crashed
	// subscription held are delivered first, not after their ack wait). A
	// truncation of the log past a consumer's position moves the position to
	// the first message the log holds (as a JetStream purge moves a consumer's
	// ack floor): the dropped messages are never delivered, and a reader that
	// must see every seq checks for gaps itself (consumers/audit does). A new
	// consumer whose Start.Seq the log no longer holds is a *TruncatedError.
	//
	// Creating a consumer is the admin's (Create): a Subscribe of a user the
	// server does not let create one, of a consumer that does not exist, is a
	// *NoConsumerError.
	Subscribe(ctx context.Context, c FeedConsumer) (Subscription, error)

	// Create makes the durable consumer c as Subscribe would, without
	// subscribing: the admin's, so that a user who may only read its own
	// consumer finds it made. An existing one with c's filter is left as it
	// is; one with another filter is ErrInvalid (FilterError).
	Create(ctx context.Context, c FeedConsumer) error

	// Positions returns the consumers Subscribe made, sorted by name.
	Positions(ctx context.Context) ([]FeedPosition, error)

	// Delete deletes a consumer Subscribe made (its position; its dead letters
	// stay). ErrNotFound if there is none by that name, ErrInvalid if it was
	// not made by Subscribe.
	Delete(ctx context.Context, name string) error

	// DeadLetter stores body as consumer's dead letter of seq. Storing the same
	// consumer's letter of the same seq again (a retry) stores nothing twice.
	DeadLetter(ctx context.Context, consumer string, seq Seq, body []byte) error

	// DeadLetters calls fn with the stored dead letters of consumer (of every
	// consumer when ""), oldest first. fn returning an error stops the read
	// with that error.
	DeadLetters(ctx context.Context, consumer string, fn func(StoredDeadLetter) error) error
}

// Subscription is one open delivery of a Feed consumer. Acknowledgement is
// "all up to": acknowledging a seq acknowledges every message delivered
// before it. A message neither acknowledged nor in progress for the
// consumer's AckWait is delivered again; so is every message not acknowledged
// when a subscription ends and the next one starts.
type Subscription interface {
	// Next returns the next message; it waits for one until ctx is done, or
	// until Close (ErrClosed).
	Next(ctx context.Context) (FeedMessage, error)
	// Ack acknowledges the message at seq and every one delivered before it.
	Ack(seq Seq) error
	// InProgress restarts the ack wait of the message at seq.
	InProgress(seq Seq) error
	// Close ends the subscription; messages not acknowledged are delivered
	// again to the next one.
	Close() error
}

// FeedConsumer describes a Feed's durable consumer.
type FeedConsumer struct {
	Name string // [A-Za-z0-9_-]{1,64}
	// Partitions restricts it to those partitions' events (sorted, none
	// twice); none: every message of the log, quarantine notices included.
	Partitions []string
	Start      FeedStart     // where a new consumer begins
	AckWait    time.Duration // how long a delivered message may go unacknowledged
}

// FeedStart says where a new Feed consumer begins: its zero value at the
// log's first event.
type FeedStart struct {
	New bool // after the log's last event when the consumer is created
	Seq Seq  // at this seq, when > 0
}

// String returns "all", "new" or the seq: how Positions shows it.
func (s FeedStart) String() string {
	switch {
	case s.New:
		return "new"
	case s.Seq > 0:
		return strconv.FormatUint(uint64(s.Seq), 10)
	}
	return "all"
}

// FeedMessage is one message a Subscription delivers: a seq of the log, as
// the log stores it (ledger.MessageReader decodes it).
type FeedMessage struct {
	Seq     Seq
	Subject string
	Data    []byte
}

// FeedPosition is a Feed consumer's position.
type FeedPosition struct {
	Name       string
	Partitions []string // its filter; none: every partition
	Start      string   // all, new or a seq, as created
	// AckFloor: every message of the filter up to this seq is acknowledged.
	AckFloor    Seq
	Delivered   Seq    // last seq delivered
	Pending     uint64 // messages of the filter not yet delivered
	AckPending  int    // delivered, not yet acknowledged
	Redelivered int    // delivered more than once, not yet acknowledged
	DeadLetters uint64 // its dead letters stored
	Head        Seq    // the log's last seq
	Waiting     int    // > 0 while a subscription is open and waiting
}

// StoredDeadLetter is a dead letter as a Feed keeps it.
type StoredDeadLetter struct {
	Consumer string
	Stored   Seq       // its seq among the dead letters
	Received time.Time // when the feed stored it, by the feed's clock
	Body     []byte
}

// CheckFeedConsumer checks c as Subscribe takes it: a valid name, a positive
// ack wait, a sorted filter of partitions none of which is empty or twice.
func CheckFeedConsumer(c FeedConsumer) error {
	if !IsToken(c.Name, 64) {
		return fmt.Errorf("feed consumer name %q: want [A-Za-z0-9_-]{1,64}: %w", c.Name, ErrInvalid)
	}
	if c.AckWait <= 0 {
		return fmt.Errorf("feed consumer %q: ack wait %v: want > 0: %w", c.Name, c.AckWait, ErrInvalid)
	}
	for i, p := range c.Partitions {
		if p == "" || i > 0 && p <= c.Partitions[i-1] {
			return fmt.Errorf("feed consumer %q: partitions %q: want sorted, non-empty, none twice: %w", c.Name, c.Partitions, ErrInvalid)
		}
	}
	return nil
}

// NoConsumerError is Subscribe's error for a durable consumer that does not
// exist and that this user may not create: an admin creates consumers
// (Feed.Create; syncledger consume create). Err is the server's refusal (a
// *PermissionError): errors.Is(err, ErrPermission) and ErrNotFound hold.
type NoConsumerError struct {
	Name string
	Err  error
}

func (e *NoConsumerError) Error() string {
	return fmt.Sprintf("consumer %q does not exist, and this user may not create it: an admin creates consumers (%v)", e.Name, e.Err)
}

func (e *NoConsumerError) Unwrap() []error { return []error{ErrNotFound, e.Err} }

// FilterError is Subscribe's refusal of an existing consumer made with
// another filter.
func FilterError(name string, have, want []string) error {
	if slices.Equal(have, want) {
		return nil
	}
	return fmt.Errorf("consumer %q exists with partitions %q, not %q (delete it first, or use another name): %w", name, have, want, ErrInvalid)
}

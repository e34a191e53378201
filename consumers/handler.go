package consumers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/syncledger/syncledger/ledger"
)

// Handler handles the ledger's commits, one at a time, in seq order.
//
// Handle returning nil acknowledges the commit (for a Flusher, once Flush has
// returned nil). Returning an error makes the Runner call Handle again with the
// same commit after a backoff, up to Config.MaxDeliver attempts; an error wrapping
// ErrPermanent (see Permanent) skips the retries; one wrapping ErrStop (see
// Stop) stops the Runner. A commit that fails every
// attempt goes to the dead-letter subject and the Runner moves on.
//
// Delivery is at least once: after a crash, or a lost acknowledgement, Handle is
// called again with commits it has already handled, always in seq order, so a
// handler that must act once per commit remembers the last Commit.Seq it acted on
// and skips commits at or below it.
type Handler interface {
	Handle(ctx context.Context, c Commit) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, c Commit) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c Commit) error { return f(ctx, c) }

// Flusher is implemented by handlers that buffer their output. The Runner calls
// Flush before it acknowledges the commits handled since the last Flush: when no
// further message is waiting, every Config.FlushEvery commits, before a retry or a
// dead letter, and on shutdown. An error from Flush stops the Runner; the
// unacknowledged commits are delivered again on restart.
type Flusher interface {
	Flush(ctx context.Context) error
}

// ErrPermanent marks a handler error that retrying cannot fix (a webhook's 4xx
// answer, say): the commit goes to the dead-letter subject at once.
var ErrPermanent = errors.New("permanent failure")

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() []error {
	return []error{e.err, ErrPermanent}
}

// ErrStop marks a handler error after which the consumer must not go on (the
// audit consumer given a commit past a gap in the ledger's seqs, say): the
// Runner neither retries the commit nor dead-letters it, acknowledges what was
// handled before it, and returns the error. The commit is delivered again
// when the consumer runs again.
var ErrStop = errors.New("consumer stopped")

// Stop wraps err so that errors.Is(err, ErrStop) holds.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrStop, err)
}

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// Start says where a new consumer begins. It applies when the durable consumer
// is created; an existing consumer keeps its position.
type Start struct {
	kind int // 0 all, 1 new, 2 at seq
	seq  ledger.Seq
}

var (
	// StartAll starts at the ledger's first event.
	StartAll = Start{}
	// StartNew starts after the ledger's last event when the consumer is created.
	StartNew = Start{kind: 1}
)

// StartAt starts at seq.
func StartAt(seq ledger.Seq) Start { return Start{kind: 2, seq: seq} }

// ParseStart parses "all", "new" or a seq.
func ParseStart(s string) (Start, error) {
	switch s {
	case "all", "":
		return StartAll, nil
	case "new":
		return StartNew, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return Start{}, fmt.Errorf("start %q: want all, new or a seq ≥ 1: %w", s, ledger.ErrInvalid)
	}
	return StartAt(ledger.Seq(n)), nil
}

// feed returns s as the Feed port takes it.
func (s Start) feed() ledger.FeedStart {
	switch s.kind {
	case 1:
		return ledger.FeedStart{New: true}
	case 2:
		return ledger.FeedStart{Seq: s.seq}
	}
	return ledger.FeedStart{}
}

func (s Start) String() string {
	switch s.kind {
	case 1:
		return "new"
	case 2:
		return strconv.FormatUint(uint64(s.seq), 10)
	}
	return "all"
}

// ValidateName checks a consumer name: [A-Za-z0-9_-]{1,64}.
func ValidateName(name string) error {
	if !ledger.IsToken(name, 64) {
		return fmt.Errorf("consumer name %q: want [A-Za-z0-9_-]{1,64}: %w", name, ledger.ErrInvalid)
	}
	return nil
}

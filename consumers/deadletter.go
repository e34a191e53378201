package consumers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// DeadLetter is a commit (or a message that does not decode) that a consumer
// gave up on, with the last error. It is the JSON body of a dead-letter message.
type DeadLetter struct {
	Ledger   string      `json:"ledger"`
	Consumer string      `json:"consumer"`
	Seq      ledger.Seq  `json:"seq"` // the commit's seq
	Commit   string      `json:"commit,omitempty"`
	Error    string      `json:"error"`
	Attempts int         `json:"attempts"` // handler calls; 0 if the message did not decode
	At       time.Time   `json:"at"`
	Events   []DeadEvent `json:"events"`
	Stored   ledger.Seq  `json:"-"` // seq in the dead-letter stream, when read back
	Received time.Time   `json:"-"` // when the dead-letter stream stored it, when read back
}

// DeadEvent is one message of a dead-lettered commit as the ledger stores it.
type DeadEvent struct {
	Seq     ledger.Seq      `json:"seq"`
	Subject string          `json:"subject"`
	Event   json.RawMessage `json:"event,omitempty"` // the stored event, when it is JSON
	Raw     []byte          `json:"raw,omitempty"`   // the stored body otherwise
}

// deadLetter stores msgs (one commit, or one message that does not decode)
// with cause as a dead letter, then acknowledges them, so the consumer moves
// on. Commits handled before are flushed and acknowledged first.
func (s *session) deadLetter(recs []ledger.Record, msgs []ledger.FeedMessage, seq ledger.Seq, cause error, attempts int) error {
	r := s.r
	if err := s.flush(); err != nil {
		return err
	}
	dl := DeadLetter{
		Ledger: s.rd.Name, Consumer: r.cfg.Name, Seq: seq, Error: cause.Error(),
		Attempts: attempts, At: r.cfg.Now().UTC(), Events: make([]DeadEvent, len(msgs)),
	}
	if len(recs) > 0 {
		dl.Commit = recs[0].Event.Commit
	}
	for i, m := range msgs {
		ev := DeadEvent{Seq: m.Seq, Subject: m.Subject}
		if json.Valid(m.Data) {
			ev.Event = json.RawMessage(m.Data)
		} else {
			ev.Raw = m.Data
		}
		dl.Events[i] = ev
	}
	body, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("consumer %q: dead letter of seq %d: %w", r.cfg.Name, seq, err)
	}
	if err := r.cfg.Feed.DeadLetter(s.hctx, r.cfg.Name, seq, body); err != nil {
		return fmt.Errorf("consumer %q: store the dead letter of seq %d: %w", r.cfg.Name, seq, err)
	}
	s.done, s.toAck = msgs[len(msgs)-1].Seq, msgs[len(msgs)-1].Seq
	r.seq.Store(uint64(s.done))
	r.dead.Add(1)
	r.log.Error("commit dead-lettered", "seq", seq, "commit", dl.Commit, "attempts", attempts, "err", cause)
	return s.flush()
}

// ReadDeadLetters calls fn with the dead letters of a consumer of the feed's
// ledger, oldest first; consumer "" reads every consumer's. A ledger without
// dead letters calls fn never.
func ReadDeadLetters(ctx context.Context, feed ledger.Feed, consumer string, fn func(DeadLetter) error) error {
	if consumer != "" {
		if err := ValidateName(consumer); err != nil {
			return err
		}
	}
	return feed.DeadLetters(ctx, consumer, func(d ledger.StoredDeadLetter) error {
		var dl DeadLetter
		if err := json.Unmarshal(d.Body, &dl); err != nil {
			return fmt.Errorf("read dead letters: dead letter %d: %v: %w", d.Stored, err, ledger.ErrInvalid)
		}
		dl.Stored, dl.Received = d.Stored, d.Received
		return fn(dl)
	})
}

package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// DeadLetterStream returns the name of the stream keeping a ledger's dead
// letters. Its prefix "SYNCLEDGER-DLQ_" cannot be a ledger's stream name
// ("SYNCLEDGER_<ledger>"), whatever the ledger is called.
func DeadLetterStream(ledgerName string) string { return "SYNCLEDGER-DLQ_" + ledgerName }

// DeadLetterSubject returns the subject of a consumer's dead letters:
// syncledger.<ledger>.dlq.<consumer>, outside the ledger stream's
// syncledger.<ledger>.p.> subjects.
func DeadLetterSubject(ledgerName, consumer string) string {
	return ledger.SubjectRoot + "." + ledgerName + ".dlq." + consumer
}

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

// ensureDeadLetterStream creates the ledger's dead-letter stream if it is missing,
// with the ledger stream's replicas.
func (r *Runner) ensureDeadLetterStream(ctx context.Context, info ledger.Info) error {
	name := DeadLetterStream(info.Name)
	_, err := r.js.Stream(ctx, name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("consumer %q: dead-letter stream %s: %w", r.cfg.Name, name, err)
	}
	_, err = r.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        name,
		Description: "syncledger dead letters of ledger " + info.Name,
		Subjects:    []string{DeadLetterSubject(info.Name, ">")},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(info.Replicas, 1),
		Duplicates:  2 * time.Minute,
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("consumer %q: create dead-letter stream %s: %w", r.cfg.Name, name, err)
	}
	return nil
}

// deadLetter publishes msgs (one commit, or one message that does not decode)
// with cause to the dead-letter subject, then terminates them, so the consumer
// moves on. Commits handled before are flushed and acknowledged first.
func (s *session) deadLetter(recs []ledger.Record, msgs []jetstream.Msg, seq ledger.Seq, cause error, attempts int) error {
	r := s.r
	if err := s.flush(); err != nil {
		return err
	}
	dl := DeadLetter{
		Ledger: s.ledgerName, Consumer: r.cfg.Name, Seq: seq, Error: cause.Error(),
		Attempts: attempts, At: r.cfg.Now().UTC(), Events: make([]DeadEvent, len(msgs)),
	}
	if len(recs) > 0 {
		dl.Commit = recs[0].Event.Commit
	}
	for i, m := range msgs {
		ev := DeadEvent{Subject: m.Subject()}
		if md, err := m.Metadata(); err == nil {
			ev.Seq = ledger.Seq(md.Sequence.Stream)
		}
		if json.Valid(m.Data()) {
			ev.Event = json.RawMessage(m.Data())
		} else {
			ev.Raw = m.Data()
		}
		dl.Events[i] = ev
	}
	body, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("consumer %q: dead letter of seq %d: %w", r.cfg.Name, seq, err)
	}
	subj := DeadLetterSubject(s.ledgerName, r.cfg.Name)
	_, err = r.js.Publish(s.hctx, subj, body,
		jetstream.WithMsgID(r.cfg.Name+"/"+strconv.FormatUint(uint64(seq), 10)),
		jetstream.WithExpectStream(DeadLetterStream(s.ledgerName)))
	if err != nil {
		return fmt.Errorf("consumer %q: publish dead letter of seq %d to %s: %w", r.cfg.Name, seq, subj, err)
	}
	last := msgs[len(msgs)-1]
	if err := last.TermWithReason("dead-lettered to " + subj); err != nil {
		return fmt.Errorf("consumer %q: terminate seq %d: %w", r.cfg.Name, seq, err)
	}
	if md, err := last.Metadata(); err == nil {
		s.done = ledger.Seq(md.Sequence.Stream)
		r.seq.Store(uint64(s.done))
	}
	r.dead.Add(1)
	r.log.Error("commit dead-lettered", "seq", seq, "commit", dl.Commit, "attempts", attempts, "subject", subj, "err", cause)
	return nil
}

// ReadDeadLetters calls fn with the dead letters of a consumer of the ledger,
// oldest first; consumer "" reads every consumer's. A ledger without dead letters
// calls fn never.
func ReadDeadLetters(ctx context.Context, nc *nats.Conn, ledgerName, consumer string, fn func(DeadLetter) error) error {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(DefaultTimeout))
	if err != nil {
		return err
	}
	subj := DeadLetterSubject(ledgerName, ">")
	if consumer != "" {
		if err := ValidateName(consumer); err != nil {
			return err
		}
		subj = DeadLetterSubject(ledgerName, consumer)
	}
	st, err := js.Stream(ctx, DeadLetterStream(ledgerName))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	if st.CachedInfo().State.Msgs == 0 {
		return nil
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	if len(info.State.Subjects) == 0 {
		return nil
	}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	it, err := oc.Messages()
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("read dead letters: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("read dead letters: %w", err)
		}
		var dl DeadLetter
		if err := json.Unmarshal(m.Data(), &dl); err != nil {
			return fmt.Errorf("read dead letters: message %d: %v: %w", md.Sequence.Stream, err, ledger.ErrInvalid)
		}
		dl.Stored, dl.Received = ledger.Seq(md.Sequence.Stream), md.Timestamp
		if err := fn(dl); err != nil {
			return err
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}

package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/syncledger/syncledger/ledger"
)

// ErrOutcomeUnknown is ledger.ErrOutcomeUnknown, under the name callers of
// this package have used.
var ErrOutcomeUnknown = ledger.ErrOutcomeUnknown

// errLostAck stands for an ack a test discarded (faults.loseAck).
var errLostAck = errors.New("ack lost (test)")

// headerReserve bounds the headers Append adds to an event (message id, expected
// stream and subject seq, batch id, sequence and commit).
const headerReserve = 512

// Flow control of atomic batches: small batches go out in one round trip (the
// commit's ack); larger ones wait for the server's ack of the first message and
// then of every batchAckEvery-th, so a big commit cannot flood the connection.
const (
	smallBatch    = 8
	batchAckEvery = 64
)

// commit is a validated, encoded Append input.
type commit struct {
	id       string
	events   []ledger.Event
	subjects []string
	data     [][]byte
	// expect[i] is the subject's last seq part i's publish expects: its
	// event's Prev, or a quarantined message after it (see skipQuarantined).
	expect []ledger.Seq
}

func (c *commit) String() string { return "commit " + c.id }

// msgID is the Nats-Msg-Id of part i (0-based): "<commit uuid>/<part>".
func (c *commit) msgID(i int) string { return c.id + "/" + strconv.Itoa(i+1) }

func (l *Log) msg(c *commit, i int) *nats.Msg {
	m := nats.NewMsg(c.subjects[i])
	m.Data = c.data[i]
	m.Header.Set(jetstream.MsgIDHeader, c.msgID(i))
	m.Header.Set(jetstream.ExpectedStreamHeader, l.stream)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(uint64(c.expect[i]), 10))
	return m
}

// prepare validates events as one commit and encodes them.
func (l *Log) prepare(events []ledger.Event) (*commit, error) {
	if err := ledger.CheckAppend(l.uuid, events); err != nil {
		return nil, err
	}
	k, id := len(events), events[0].Commit
	c := &commit{id: id, events: events, subjects: make([]string, k), data: make([][]byte, k), expect: make([]ledger.Seq, k)}
	maxData := int(l.nc.MaxPayload()) - headerReserve
	for i, e := range events {
		c.expect[i] = e.Prev
		b, err := ledger.EncodeEvent(e)
		if err != nil {
			return nil, fmt.Errorf("append commit %s part %d: %w", id, i+1, err)
		}
		if len(b) > maxData {
			return nil, fmt.Errorf("append commit %s part %d: event of %d bytes, the server takes at most %d (use ledger.Externalize): %w", id, i+1, len(b), maxData, ledger.ErrTooLarge)
		}
		subj := ledger.Subject(l.name, e.Partition)
		if len(subj) > MaxSubjectLen {
			return nil, fmt.Errorf("append commit %s part %d: partition key of %d bytes makes a subject of %d bytes, limit %d: %w", id, i+1, len(e.Partition), len(subj), MaxSubjectLen, ledger.ErrTooLarge)
		}
		c.subjects[i], c.data[i] = subj, b
	}
	return c, nil
}

// Append publishes one commit's events (see ledger.CommitLog). One event is one
// publish; k > 1 events are one JetStream atomic batch. Every message carries
// Nats-Msg-Id "<commit>/<part>", Nats-Expected-Stream and
// Nats-Expected-Last-Subject-Sequence = event.Prev (0: the partition has no
// event yet — the server enforces that).
//
// An answer other than a clean ack — a timeout, no responders, a lost
// connection, "wrong last sequence" (which is also how one node answers a retry
// of a stored message), "duplicate message id" (how a retried batch is
// answered), a duplicate ack (how R3 answers a retried message), "too many
// batches in flight" — is resolved by reading through the stream leader (see
// resolve and the package doc): stored → success with the stored seqs; another
// commit holds the place after a Prev → *ledger.ConflictError (Actual read from
// the partition's last seq); nothing → publish again (bounded attempts with
// backoff, honoring ctx). The error text alone never decides. Errors after
// which the commit may be stored wrap ErrOutcomeUnknown.
func (l *Log) Append(ctx context.Context, events []ledger.Event) ([]ledger.Seq, error) {
	l.opened.drop()
	c, err := l.prepare(events)
	if err != nil {
		return nil, err
	}
	var (
		lastErr   error
		ambiguous bool // some attempt may have stored the commit
		wait      = l.opts.retryWait
	)
	for attempt := 1; ; attempt++ {
		var (
			seqs []ledger.Seq
			err  error
		)
		err = l.faults.failSend(attempt)
		if err == nil {
			seqs, err = l.publish(ctx, c)
		}
		if err == nil && l.faults.loseAck(attempt) {
			seqs, err = nil, errLostAck
		}
		if err == nil {
			return seqs, nil
		}
		if perr := l.permissionDenied(); perr != nil {
			// The server never accepts a publish it has no permission for: nothing
			// was stored, by this attempt or any other.
			return nil, fmt.Errorf("append %v: %w", c, perr)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("append %v: %w: %w (retry Append with the same events)", c, ErrOutcomeUnknown, unreachable(l.nc, context.Cause(ctx)))
		}
		final := refused(err)
		ambiguous = ambiguous || !final
		lastErr = err
		if final && !ambiguous {
			return nil, fmt.Errorf("append %v: %w", c, l.refusal(ctx, err))
		}
		res, rerr := l.resolve(ctx, c)
		switch {
		case errors.Is(rerr, ledger.ErrNotFound):
			return nil, fmt.Errorf("append %v: %w", c, rerr) // no stream, nothing stored
		case rerr != nil:
			lastErr = fmt.Errorf("%w; reading the partitions: %w", err, rerr)
		case res.seqs != nil:
			return res.seqs, nil
		case res.conflict != nil:
			past, qerr := l.skipQuarantined(ctx, c, res.conflict)
			if qerr != nil {
				return nil, fmt.Errorf("append %v: %w; reading the quarantined seqs: %w", c, res.conflict, qerr)
			}
			if past {
				continue // publish again, expecting the quarantined message
			}
			return nil, fmt.Errorf("append %v: %w", c, res.conflict)
		case final:
			return nil, fmt.Errorf("append %v: %w", c, l.refusal(ctx, err))
		}
		if attempt >= l.opts.attempts {
			return nil, fmt.Errorf("append %v: %d attempts: %w: %w (retry Append with the same events)", c, attempt, ErrOutcomeUnknown, unreachable(l.nc, lastErr))
		}
		ledger.NoteRetry(ctx, "append", l.retryNote(lastErr))
		if err := ledger.SleepCtx(ctx, wait+rand.N(wait/2+1)); err != nil {
			return nil, fmt.Errorf("append %v: %w: %w; last attempt: %w (retry Append with the same events)", c, ErrOutcomeUnknown, err, lastErr)
		}
		wait = min(2*wait, maxRetryWait)
	}
}

// retryNote is what a retried publish met, as its caller is told
// (ledger.NoteRetry): a connection down is the server unreachable, a
// request that timed out on a live one a server not acknowledging.
func (l *Log) retryNote(err error) error {
	err = unreachable(l.nc, err)
	if !errors.Is(err, ledger.ErrUnreachable) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the server did not acknowledge the publish within %v: %w", l.opts.timeout, err)
	}
	return err
}

// permissionDenied returns the server's refusal of a publish to this
// ledger's subjects, if that is the connection's last asynchronous error (a
// publish without permission gets no reply, only that report, so the publish
// itself just times out): a *ledger.PermissionError.
func (l *Log) permissionDenied() error {
	if pe := lastRefusal(l.nc, func(s string) bool { return strings.HasPrefix(s, l.prefix) }); pe != nil {
		return pe
	}
	return nil
}

// refused reports whether err is the server's definite refusal of the publish
// (nothing stored by this attempt, and retrying will not help), as opposed to an
// answer that needs resolving: a conflict, a duplicate, or a transient or
// unknown outcome.
func refused(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return true
	}
	code, ok := apiCode(err)
	if !ok {
		return false // timeouts, no responders, connection trouble, invalid acks
	}
	switch code {
	case codeWrongLastSeq, codeWrongLastSeqConstant, codeDupInProcess, codeBatchDupMsgID,
		codeBatchIncomplete, codeAtomicInflight, codeBatchInflight, codeClusterNotLeader:
		return false
	}
	return true
}

// refusal maps a definite refusal to the ledger's sentinels where one fits: a
// server without room for it is a *ledger.ServerFullError, with what the
// server says of its disk.
func (l *Log) refusal(ctx context.Context, err error) error {
	code, _ := apiCode(err)
	switch {
	case ServerFull(err) != nil:
		return withServerState(ctx, l.nc, l.name, l.opts.timeout, ServerFull(err))
	case code == codeStreamNotFound:
		return fmt.Errorf("stream %s: %w (%v)", l.stream, ledger.ErrNotFound, err)
	case code == codeBatchTooLarge, errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w (%v)", ledger.ErrTooLarge, err)
	}
	return err
}

// publish makes one attempt, bounded by the per-request timeout.
func (l *Log) publish(ctx context.Context, c *commit) ([]ledger.Seq, error) {
	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	k := len(c.events)
	if k == 1 {
		return l.publishOne(ctx, c)
	}
	msgs := make([]*nats.Msg, k)
	for i := range msgs {
		msgs[i] = l.msg(c, i)
	}
	fc := jetstreamext.BatchFlowControl{AckTimeout: l.opts.timeout}
	if dl, ok := ctx.Deadline(); ok {
		fc.AckTimeout = max(time.Until(dl), time.Millisecond)
	}
	if k > smallBatch {
		fc.AckFirst, fc.AckEvery = true, batchAckEvery
	}
	ack, err := jetstreamext.PublishMsgBatch(ctx, l.js, msgs, fc)
	if err != nil {
		return nil, err
	}
	if ack.Stream != l.stream || ack.Sequence < uint64(k) {
		return nil, fmt.Errorf("batch ack for stream %q seq %d: %w", ack.Stream, ack.Sequence, jetstream.ErrInvalidJSAck)
	}
	// An atomic batch has consecutive seqs, the last one acked.
	seqs := make([]ledger.Seq, k)
	for i := range seqs {
		seqs[i] = ledger.Seq(ack.Sequence) - ledger.Seq(k-1-i)
	}
	return seqs, nil
}

// errDuplicateAck is the server's answer to a message id it has stored already
// (how a replicated stream answers a retry).
type errDuplicateAck struct{ seq uint64 }

func (e errDuplicateAck) Error() string { return fmt.Sprintf("duplicate of stored seq %d", e.seq) }

func (l *Log) publishOne(ctx context.Context, c *commit) ([]ledger.Seq, error) {
	resp, err := l.nc.RequestMsgWithContext(ctx, l.msg(c, 0))
	if err != nil {
		return nil, err
	}
	var ack struct {
		apiResponse
		Stream    string `json:"stream"`
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	switch {
	case ack.Error != nil:
		return nil, ack.Error
	case ack.Stream != l.stream || ack.Seq == 0:
		return nil, fmt.Errorf("ack for stream %q seq %d: %w", ack.Stream, ack.Seq, jetstream.ErrInvalidJSAck)
	case ack.Duplicate:
		return nil, errDuplicateAck{ack.Seq}
	}
	return []ledger.Seq{ledger.Seq(ack.Seq)}, nil
}

type resolution struct {
	seqs     []ledger.Seq // the commit is stored at these seqs
	conflict *ledger.ConflictError
	// neither: nothing of the commit is stored and every partition's last seq
	// is still the event's Prev
}

// resolvePartialWait bounds how long resolve waits for a batch seen partly
// applied (possible on a replicated stream while the leader applies it).
const resolvePartialWait = 2 * time.Second

// resolve finds out whether the commit is stored, reading through the stream
// leader. The server stores an event only when its Prev is its partition's last
// seq, so the first message after Prev on part 1's subject is part 1 exactly when
// the commit is stored — even if other commits have extended the partition since
// (its head alone would not tell). An atomic batch is all or nothing at
// consecutive seqs, so part 1 at seq s means parts 1..k at s..s+k-1; the last
// part is read too, to see the whole batch applied. If part 1 is not there, each
// partition's last seq is compared with its event's Prev to find the conflict,
// if any, and part 1 is looked for once more: an earlier attempt still in
// flight may have landed in between, moving the partitions itself. Cost: 1 or 2
// requests when stored, up to k+2 when not.
func (l *Log) resolve(ctx context.Context, c *commit) (resolution, error) {
	k := len(c.events)
	deadline := time.Now().Add(resolvePartialWait)
	for {
		first, ok, err := l.firstPart(ctx, c)
		if err != nil {
			return resolution{}, err
		}
		if !ok {
			l.faults.partOneAbsent()
			conflict, err := l.findConflict(ctx, c)
			if err != nil || conflict == nil {
				return resolution{}, err
			}
			if first, ok, err = l.firstPart(ctx, c); err != nil {
				return resolution{}, err
			}
			if !ok {
				return resolution{conflict: conflict}, nil
			}
		}
		seqs := make([]ledger.Seq, k)
		for i := range seqs {
			seqs[i] = first + ledger.Seq(i)
		}
		if k == 1 {
			return resolution{seqs: seqs}, nil
		}
		last, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: uint64(seqs[k-1])})
		switch {
		case err != nil:
			return resolution{}, err
		case ok && l.isOurs(last, c, k-1):
			return resolution{seqs: seqs}, nil
		case ok:
			return resolution{}, fmt.Errorf("%v: part 1 stored at seq %d but seq %d is not part %d: atomic batch not contiguous", c, seqs[0], seqs[k-1], k)
		case time.Now().After(deadline):
			return resolution{}, fmt.Errorf("%v: part 1 stored at seq %d but part %d not at seq %d after %v", c, seqs[0], k, seqs[k-1], resolvePartialWait)
		}
		// Part 1 is visible, the rest not yet: the batch is being applied.
		if err := ledger.SleepCtx(ctx, lagRetry); err != nil {
			return resolution{}, err
		}
	}
}

// firstPart returns the seq of the commit's part 1 if it is stored: the first
// message after the seq its publish expects (its Prev) on its subject.
func (l *Log) firstPart(ctx context.Context, c *commit) (ledger.Seq, bool, error) {
	m, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: uint64(c.expect[0]) + 1, NextFor: c.subjects[0]})
	if err != nil || !ok || !l.isOurs(m, c, 0) {
		return 0, false, err
	}
	return m.Seq, true, nil
}

// findConflict returns the first partition whose last seq is not its event's
// Prev, nil if there is none.
func (l *Log) findConflict(ctx context.Context, c *commit) (*ledger.ConflictError, error) {
	for i, e := range c.events {
		last, err := l.leaderLastSeq(ctx, c.subjects[i])
		if err != nil {
			return nil, err
		}
		if last != c.expect[i] {
			return &ledger.ConflictError{Partition: e.Partition, Expected: e.Prev, Actual: last}, nil
		}
	}
	return nil, nil
}

// isOurs reports whether m is part i of commit c.
func (l *Log) isOurs(m rawMsg, c *commit, i int) bool {
	if m.Subject != c.subjects[i] {
		return false
	}
	e, err := ledger.DecodeEvent(m.Data)
	return err == nil && e.Commit == c.id && e.Part == i+1 && e.Partition == c.events[i].Partition
}

// leaderLastSeq is the seq of the subject's last message (0 if none), as the
// stream leader sees it.
func (l *Log) leaderLastSeq(ctx context.Context, subj string) (ledger.Seq, error) {
	m, ok, err := l.leaderGet(ctx, msgGetRequest{LastFor: subj})
	if err != nil || !ok {
		return 0, err
	}
	return m.Seq, nil
}

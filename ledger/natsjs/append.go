package natsjs

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// commit is a validated, encoded Append input: its events' messages, then
// its fence checks' (ledger.Fence).
type commit struct {
	id string
	// nonce, empty at first, follows the commit's message ids once another
	// message was found holding them (see Append): a random suffix no other
	// user can know before the server stores the commit.
	nonce    string
	events   []ledger.Event
	fences   []ledger.Fence
	subjects []string // of every message: the events', then the fence checks'
	data     [][]byte
	// expect[i] is the last seq message i's publish expects of its subject —
	// an event's Prev, or a quarantined message after it (see
	// skipQuarantined) — or, for a fence check, of its lock's fence subject:
	// the fence.
	expect []ledger.Seq
}

func (c *commit) String() string { return "commit " + c.id }

// msgID is the Nats-Msg-Id of message i (0-based): "<commit uuid>/<part>"
// for an event, ledger.FenceCheckID for a fence check; then the commit's
// nonce if it has one ("<commit uuid>/<part>.<nonce>").
func (c *commit) msgID(i int) string {
	id := c.id + "/" + strconv.Itoa(i+1)
	if k := len(c.events); i >= k {
		id = ledger.FenceCheckID(c.id, i-k)
	}
	if c.nonce != "" {
		id += "." + c.nonce
	}
	return id
}

// newNonce returns 128 random bits, URL-safe: a batch id, or a commit's
// message ids' nonce, that no other user can know before the server stores
// what carries it.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// duplicate reports whether err is the server's answer to a message id it
// holds already: a duplicate ack, a batch holding a stored id, or one in
// process.
func duplicate(err error) bool {
	var d errDuplicateAck
	if errors.As(err, &d) {
		return true
	}
	code, ok := apiCode(err)
	return ok && (code == codeBatchDupMsgID || code == codeDupInProcess)
}

func (l *logDriver) msg(c *commit, i int) *nats.Msg {
	m := nats.NewMsg(c.subjects[i])
	m.Data = c.data[i]
	m.Header.Set(jetstream.MsgIDHeader, c.msgID(i))
	m.Header.Set(jetstream.ExpectedStreamHeader, l.stream)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(uint64(c.expect[i]), 10))
	if k := len(c.events); i >= k {
		// The fence check: stored only while its lock's fence subject's last
		// seq is the fence (the server checks it inside the atomic batch).
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, ledger.FenceSubject(l.name, c.fences[i-k].Lock))
	}
	return m
}

// prepare checks what the server limits of a batch ledger.Log checked and
// encoded (each message's size, each subject's length) and makes it a
// commit.
func (l *logDriver) prepare(b *ledger.AppendBatch) (*commit, error) {
	events, fences, id := b.Events, b.Fences, b.Commit
	k := len(events)
	c := &commit{id: id, events: events, fences: fences, subjects: b.Subjects, data: b.Data, expect: make([]ledger.Seq, len(b.Data))}
	maxData := int(l.nc.MaxPayload()) - headerReserve
	for i, e := range events {
		c.expect[i] = e.Prev
		if len(b.Data[i]) > maxData {
			return nil, fmt.Errorf("append commit %s part %d: event of %d bytes, the server takes at most %d (use ledger.Externalize): %w", id, i+1, len(b.Data[i]), maxData, ledger.ErrTooLarge)
		}
		if subj := b.Subjects[i]; len(subj) > MaxSubjectLen {
			return nil, fmt.Errorf("append commit %s part %d: partition key of %d bytes makes a subject of %d bytes, limit %d: %w", id, i+1, len(e.Partition), len(subj), MaxSubjectLen, ledger.ErrTooLarge)
		}
	}
	for i, f := range fences {
		if subj := ledger.FenceSubject(l.name, f.Lock); len(subj) > MaxSubjectLen {
			return nil, fmt.Errorf("append commit %s fence %d: lock name of %d bytes makes a subject of %d bytes, limit %d: %w", id, i+1, len(f.Lock), len(subj), MaxSubjectLen, ledger.ErrTooLarge)
		}
		c.expect[k+i] = f.Seq
	}
	return c, nil
}

// Append publishes one commit's events (see ledger.CommitLog). One event is one
// publish; k > 1 events, or any event with fences, are one JetStream atomic
// batch. Every message carries Nats-Msg-Id "<commit>/<part>",
// Nats-Expected-Stream and Nats-Expected-Last-Subject-Sequence = event.Prev
// (0: the partition has no event yet — the server enforces that). A fence
// check follows the events for each fence, with
// Nats-Expected-Last-Subject-Sequence-Subject naming its lock's fence subject
// and Nats-Expected-Last-Subject-Sequence the fence: the server stores the
// batch only while every fence holds.
//
// An answer other than a clean ack — a timeout, no responders, a lost
// connection, "wrong last sequence" (which is also how one node answers a retry
// of a stored message), "duplicate message id" (how a retried batch is
// answered), a duplicate ack (how R3 answers a retried message), "too many
// batches in flight" — is resolved by reading through the stream leader (see
// resolve and the package doc): stored → success with the stored seqs; a
// fence's lock has a later fence record → *ledger.LockLostError (told before
// a conflict: never retried); another commit holds the place after a Prev →
// *ledger.ConflictError (Actual read from the partition's last seq); nothing
// → publish again (bounded attempts with backoff, honoring ctx), and, when
// the answer was a duplicate (another user's message holds the commit's
// ids), at once under ids with a random nonce. The error text alone never
// decides. Errors after which the commit may be stored wrap
// ErrOutcomeUnknown.
func (l *logDriver) Append(ctx context.Context, b *ledger.AppendBatch) ([]ledger.Seq, error) {
	l.opened.drop()
	if l.rep != nil {
		// Read from a mirror: the commit goes to the origin, checked
		// against the origin (each event's Prev); the origin then holds it,
		// and this Log reads at least up to it (the writer sees its commit
		// at once, whatever the mirror's lag).
		if err := l.rep.writable(ctx, l.name); err != nil {
			return nil, fmt.Errorf("append commit %s: %w", b.Commit, err)
		}
		at := time.Now()
		seqs, err := l.append(ctx, b)
		if err == nil {
			l.rep.raise(seqs[len(seqs)-1], at)
		}
		return seqs, err
	}
	return l.append(ctx, b)
}

func (l *logDriver) append(ctx context.Context, b *ledger.AppendBatch) ([]ledger.Seq, error) {
	c, err := l.prepare(b)
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
		case res.lost != nil:
			return nil, fmt.Errorf("append %v: %w", c, res.lost)
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
		case duplicate(err):
			// The server holds a message of this commit's ids that is not
			// the commit (resolve found it nowhere, and every partition where
			// it left it): another user published under them first — within
			// the stream's duplicate window, the server drops whatever else
			// carries them. Publish under ids no one can know.
			c.nonce = newNonce()
			if attempt < l.opts.attempts {
				continue
			}
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
func (l *logDriver) retryNote(err error) error {
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
func (l *logDriver) permissionDenied() error {
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
func (l *logDriver) refusal(ctx context.Context, err error) error {
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
func (l *logDriver) publish(ctx context.Context, c *commit) ([]ledger.Seq, error) {
	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	n := len(c.subjects)
	if n == 1 {
		seq, err := l.publishOne(ctx, l.msg(c, 0))
		if err != nil {
			return nil, err
		}
		return []ledger.Seq{seq}, nil
	}
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		msgs[i] = l.msg(c, i)
	}
	last, err := l.publishBatch(ctx, msgs)
	if err != nil {
		return nil, err
	}
	// An atomic batch has consecutive seqs, the last one acked; the events
	// come first.
	seqs := make([]ledger.Seq, len(c.events))
	for i := range seqs {
		seqs[i] = ledger.Seq(last) - ledger.Seq(n-1-i)
	}
	return seqs, nil
}

// The headers of an atomic batch (nats-server's ADR-50).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// publishBatch publishes msgs as one atomic batch and returns the seq of the
// last: what orbit.go's jetstreamext.PublishMsgBatch does, but under a batch
// id of 128 random bits (newNonce). The server keys a batch in flight by its
// id alone, whoever sends its messages: a message carrying a batch in flight's
// id and next sequence, with a commit, would close that batch with it — the
// commit's first parts stored with the sender's message, the rest refused. So
// no other user may learn or guess the id before the batch is stored (none
// subscribes to the ledger's publish subjects: natsauth; jetstreamext's ids are
// nuids, a random prefix and a sequence one process's stored batches give
// away). Small batches go out in one round trip (the commit's ack); larger
// ones wait for the server's ack of the first message and then of every
// batchAckEvery-th, so a big commit cannot flood the connection.
func (l *logDriver) publishBatch(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	k := len(msgs)
	id := newNonce()
	ackTimeout := l.opts.timeout
	if dl, ok := ctx.Deadline(); ok {
		ackTimeout = max(time.Until(dl), time.Millisecond)
	}
	for i, m := range msgs {
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i == k-1 {
			break
		}
		if k <= smallBatch || i > 0 && (i+1)%batchAckEvery != 0 {
			if err := l.nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("batch message %d: %w", i+1, err)
			}
			continue
		}
		actx, cancel := context.WithTimeout(ctx, ackTimeout)
		resp, err := l.nc.RequestMsgWithContext(actx, m)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("batch message %d ack: %w", i+1, err)
		}
		if len(resp.Data) > 0 {
			var r apiResponse
			if err := json.Unmarshal(resp.Data, &r); err == nil && r.Error != nil {
				return 0, r.Error
			}
		}
	}
	m := msgs[k-1]
	m.Header.Set(batchCommitHeader, "1")
	ack, err := l.publishAck(ctx, m)
	switch {
	case err != nil:
		return 0, err
	case ack.Stream != l.stream || ack.Batch != id || ack.Count != uint64(k) || ack.Seq < uint64(k):
		return 0, fmt.Errorf("batch ack for stream %q seq %d, batch %q of %d: %w", ack.Stream, ack.Seq, ack.Batch, ack.Count, jetstream.ErrInvalidJSAck)
	}
	return ack.Seq, nil
}

// pubAck is the server's acknowledgement of a publish: of one message, or
// of an atomic batch's commit (Batch, Count).
type pubAck struct {
	apiResponse
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Batch     string `json:"batch"`
	Count     uint64 `json:"count"`
}

// publishAck publishes m and returns the server's acknowledgement: an error
// when none came, it does not decode, or it is a refusal.
func (l *logDriver) publishAck(ctx context.Context, m *nats.Msg) (pubAck, error) {
	var ack pubAck
	resp, err := l.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return ack, err
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return ack, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return ack, ack.Error
	}
	return ack, nil
}

// errDuplicateAck is the server's answer to a message id it has stored already
// (how a replicated stream answers a retry).
type errDuplicateAck struct{ seq uint64 }

func (e errDuplicateAck) Error() string { return fmt.Sprintf("duplicate of stored seq %d", e.seq) }

// publishOne publishes one message and returns its seq.
func (l *logDriver) publishOne(ctx context.Context, m *nats.Msg) (ledger.Seq, error) {
	ack, err := l.publishAck(ctx, m)
	switch {
	case err != nil:
		return 0, err
	case ack.Stream != l.stream || ack.Seq == 0:
		return 0, fmt.Errorf("ack for stream %q seq %d: %w", ack.Stream, ack.Seq, jetstream.ErrInvalidJSAck)
	case ack.Duplicate:
		return 0, errDuplicateAck{ack.Seq}
	}
	return ledger.Seq(ack.Seq), nil
}

type resolution struct {
	seqs     []ledger.Seq // the commit is stored at these seqs
	lost     *ledger.LockLostError
	conflict *ledger.ConflictError
	// none: nothing of the commit is stored, every fence holds and every
	// partition's last seq is still the event's Prev
}

// resolvePartialWait bounds how long resolve waits for a batch seen partly
// applied (possible on a replicated stream while the leader applies it).
const resolvePartialWait = 2 * time.Second

// resolve finds out whether the commit is stored, reading through the stream
// leader. The server stores an event only when its Prev is its partition's last
// seq, so the first message after Prev on part 1's subject is part 1 exactly when
// the commit is stored — even if other commits have extended the partition since
// (its head alone would not tell). An atomic batch is all or nothing at
// consecutive seqs, so part 1 at seq s means its n messages at s..s+n-1; the
// last message is read too, to see the whole batch applied. If part 1 is not
// there, each fence's lock's last fence record is compared with the fence, and
// then each partition's last seq with its event's Prev, to find a lost lock or
// else the conflict, if any, and part 1 is looked for once more: an earlier
// attempt still in flight may have landed in between, moving the partitions
// itself. Cost: 1 or 2 requests when stored, up to n+3 when not.
func (l *logDriver) resolve(ctx context.Context, c *commit) (resolution, error) {
	k, n := len(c.events), len(c.subjects)
	deadline := time.Now().Add(resolvePartialWait)
	for {
		first, ok, err := l.firstPart(ctx, c)
		if err != nil {
			return resolution{}, err
		}
		if !ok {
			l.faults.partOneAbsent()
			var res resolution
			if res.lost, err = l.findLockLost(ctx, c); err != nil {
				return resolution{}, err
			}
			if res.lost == nil {
				if res.conflict, err = l.findConflict(ctx, c); err != nil || res.conflict == nil {
					return resolution{}, err
				}
			}
			if first, ok, err = l.firstPart(ctx, c); err != nil {
				return resolution{}, err
			}
			if !ok {
				return res, nil
			}
		}
		seqs := make([]ledger.Seq, k)
		for i := range seqs {
			seqs[i] = first + ledger.Seq(i)
		}
		if n == 1 {
			return resolution{seqs: seqs}, nil
		}
		end := first + ledger.Seq(n-1)
		last, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: uint64(end)})
		switch {
		case err != nil:
			return resolution{}, err
		case ok && l.isOurs(last, c, n-1):
			return resolution{seqs: seqs}, nil
		case ok:
			return resolution{}, fmt.Errorf("%v: part 1 stored at seq %d but seq %d is not its message %d: atomic batch not contiguous", c, seqs[0], end, n)
		case time.Now().After(deadline):
			return resolution{}, fmt.Errorf("%v: part 1 stored at seq %d but its message %d not at seq %d after %v", c, seqs[0], n, end, resolvePartialWait)
		}
		// Part 1 is visible, the rest not yet: the batch is being applied.
		if err := ledger.SleepCtx(ctx, lagRetry); err != nil {
			return resolution{}, err
		}
	}
}

// firstPart returns the seq of the commit's part 1 if it is stored: the first
// message after the seq its publish expects (its Prev) on its subject.
func (l *logDriver) firstPart(ctx context.Context, c *commit) (ledger.Seq, bool, error) {
	m, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: uint64(c.expect[0]) + 1, NextFor: c.subjects[0]})
	if err != nil || !ok || !l.isOurs(m, c, 0) {
		return 0, false, err
	}
	return m.Seq, true, nil
}

// findConflict returns the first partition whose last seq is not its event's
// Prev, nil if there is none.
func (l *logDriver) findConflict(ctx context.Context, c *commit) (*ledger.ConflictError, error) {
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

// findLockLost returns the first fence whose lock's last fence record is
// not the fence, as a *ledger.LockLostError naming who took the lock; nil if
// every fence holds.
func (l *logDriver) findLockLost(ctx context.Context, c *commit) (*ledger.LockLostError, error) {
	for _, f := range c.fences {
		last, err := l.leaderLastSeq(ctx, ledger.FenceSubject(l.name, f.Lock))
		if err != nil {
			return nil, err
		}
		if last == f.Seq {
			continue
		}
		e := &ledger.LockLostError{Lock: f.Lock, Fence: f.Seq, Last: last}
		if m, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: uint64(last)}); err == nil && ok {
			if r, err := ledger.DecodeFenceRecord(m.Data); err == nil {
				e.Taker = &r
			}
		}
		return e, nil
	}
	return nil, nil
}

// isOurs reports whether m is message i of commit c: its part i+1, or its
// fence check i-k.
func (l *logDriver) isOurs(m rawMsg, c *commit, i int) bool {
	if m.Subject != c.subjects[i] {
		return false
	}
	if k := len(c.events); i >= k {
		fc, err := ledger.DecodeFenceCheck(m.Data)
		return err == nil && fc.Commit == c.id && fc.Lock == c.fences[i-k].Lock && fc.Fence == c.fences[i-k].Seq
	}
	e, err := ledger.DecodeEvent(m.Data)
	return err == nil && e.Commit == c.id && e.Part == i+1 && e.Partition == c.events[i].Partition
}

// leaderLastSeq is the seq of the subject's last message (0 if none), as the
// stream leader sees it.
func (l *logDriver) leaderLastSeq(ctx context.Context, subj string) (ledger.Seq, error) {
	m, ok, err := l.leaderGet(ctx, msgGetRequest{LastFor: subj})
	if err != nil || !ok {
		return 0, err
	}
	return m.Seq, nil
}

package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/directget"
)

// This file holds the raw JetStream API requests the hot paths use: they parse
// only the fields they need and map the server's answers to errors precisely.

const apiPrefix = "$JS.API."

// Headers of direct get answers.
const (
	hdrStatus      = "Status"
	hdrDescription = "Description"
	hdrNumPending  = "Nats-Num-Pending"
)

// Error codes of the JetStream API this package acts on (nats-server errors.json).
const (
	codeNoMessage            jetstream.ErrorCode = 10037 // no message found
	codeStreamNotFound       jetstream.ErrorCode = 10059
	codeClusterNotLeader     jetstream.ErrorCode = 10009
	codeWrongLastSeq         jetstream.ErrorCode = 10071 // wrong last sequence: {seq}
	codeDupInProcess         jetstream.ErrorCode = 10158 // duplicate message id is in process
	codeWrongLastSeqConstant jetstream.ErrorCode = 10164 // subject has a write in flight
	codeBatchIncomplete      jetstream.ErrorCode = 10176
	codeBatchTooLarge        jetstream.ErrorCode = 10199
	codeBatchDupMsgID        jetstream.ErrorCode = 10201 // a retried batch whose ids are stored
	codeAtomicInflight       jetstream.ErrorCode = 10210
	codeBatchInflight        jetstream.ErrorCode = 10211
)

type apiResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

// streamState is the part of a stream info response the hot paths read.
type streamState struct {
	apiResponse
	Config struct {
		Metadata map[string]string `json:"metadata"`
	} `json:"config"`
	State stateOf `json:"state"`
}

// stateOf is a stream info response's state: its bounds.
type stateOf struct {
	Msgs     uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	LastTS   string `json:"last_ts"` // when the last message was stored: Head's stamp
}

// stamp is Head's stamp of the last message: its stored time as the server
// wrote it ("" for an empty stream).
func (s stateOf) stamp() string {
	if s.Msgs == 0 || strings.HasPrefix(s.LastTS, "0001-01-01") {
		return ""
	}
	return s.LastTS
}

// streamConfig is the part of a stream info response Open reads: the
// settings it checks (expect.go) and the bounds.
type streamConfig struct {
	apiResponse
	Config streamSettings `json:"config"`
	State  stateOf        `json:"state"`
}

// request sends a JetStream API request and decodes its JSON answer into v.
//
// Every request made through it is idempotent (stream info, a message get, a
// purge below a seq), so one whose answer is lost — sent as the connection
// dropped, answered while the reply subscription was not yet back — is asked
// again, at most readAttempts times in all, while ctx lasts.
func (l *logDriver) request(ctx context.Context, subj string, body []byte, v interface{ apiErr() *jetstream.APIError }) error {
	wait := l.opts.retryWait
	for attempt := 1; ; attempt++ {
		err := l.requestOnce(ctx, subj, body, v)
		if err == nil || ctx.Err() != nil || attempt >= readAttempts || !answerLost(err) {
			return err
		}
		if ledger.SleepCtx(ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, maxRetryWait)
	}
}

// readAttempts bounds the attempts of an idempotent request whose answer was
// lost: enough to ride out a reconnect, few enough that a dead server is
// reported within a few per-request timeouts.
const readAttempts = 3

// answerLost reports whether a request's error means no answer arrived (as
// opposed to an answer saying no).
func answerLost(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionReconnecting)
}

func (l *logDriver) requestOnce(ctx context.Context, subj string, body []byte, v interface{ apiErr() *jetstream.APIError }) error {
	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	msg, err := l.nc.RequestWithContext(ctx, subj, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		return fmt.Errorf("%s: undecodable answer: %w", subj, err)
	}
	if e := v.apiErr(); e != nil {
		return e
	}
	return nil
}

func (r *apiResponse) apiErr() *jetstream.APIError { return r.Error }

// bounds asks the stream leader for its state: a stream info request without
// subject or deleted-message details (one small JSON answer).
func (l *logDriver) bounds(ctx context.Context) (ledger.Bounds, error) {
	b, _, err := l.boundsStamp(ctx)
	return b, err
}

// boundsStamp is bounds with Head's stamp of the last message.
func (l *logDriver) boundsStamp(ctx context.Context) (ledger.Bounds, string, error) {
	var st streamState
	if err := l.request(ctx, apiPrefix+"STREAM.INFO."+l.stream, nil, &st); err != nil {
		return ledger.Bounds{}, "", l.mapErr(err)
	}
	if u := st.Config.Metadata[MetaUUID]; u != l.uuid {
		return ledger.Bounds{}, "", fmt.Errorf("stream %s now holds ledger %s, opened as %s: %w", l.stream, u, l.uuid, ledger.ErrLineage)
	}
	return stateBounds(st.State), st.State.stamp(), nil
}

// stateBounds is a stream state's bounds.
func stateBounds(s stateOf) ledger.Bounds {
	if s.Msgs == 0 {
		return ledger.Bounds{First: ledger.Seq(s.LastSeq + 1), Last: ledger.Seq(s.LastSeq)}
	}
	return ledger.Bounds{First: ledger.Seq(s.FirstSeq), Last: ledger.Seq(s.LastSeq)}
}

// mapErr maps a missing stream to ledger.ErrNotFound and a request that could
// not reach the server to ledger.ErrUnreachable.
func (l *logDriver) mapErr(err error) error {
	if code, ok := apiCode(err); ok && code == codeStreamNotFound {
		return fmt.Errorf("stream %s: %w (%v)", l.stream, ledger.ErrNotFound, err)
	}
	return unreachable(l.nc, err)
}

// unreachable wraps ledger.ErrUnreachable around err when err says nc has no
// server (closed, reconnecting, none to connect to), or when no answer came
// while nc was not connected. An answer saying no is never unreachable.
func unreachable(nc *nats.Conn, err error) error {
	switch {
	case err == nil || errors.Is(err, ledger.ErrUnreachable):
		return err
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		answerLost(err) && nc != nil && !nc.IsConnected():
		return fmt.Errorf("%w: %w", ledger.ErrUnreachable, err)
	}
	return err
}

func apiCode(err error) (jetstream.ErrorCode, bool) {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode, true
	}
	return 0, false
}

// rawMsg is a stored message as a get request returns it.
type rawMsg struct {
	Subject string
	Seq     ledger.Seq
	Header  nats.Header
	Data    []byte
}

// leaderGet reads one message through the stream leader
// ($JS.API.STREAM.MSG.GET), which answers from the state that decided our
// publishes; direct gets may be served by a lagging replica. Used only to
// resolve ambiguous publishes. ok is false when no message matches.
func (l *logDriver) leaderGet(ctx context.Context, req msgGetRequest) (m rawMsg, ok bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return rawMsg{}, false, err
	}
	var resp struct {
		apiResponse
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Header  []byte `json:"hdrs,omitempty"`
			Data    []byte `json:"data,omitempty"`
		} `json:"message,omitempty"`
	}
	err = l.request(ctx, apiPrefix+"STREAM.MSG.GET."+l.stream, body, &resp)
	if code, isAPI := apiCode(err); isAPI && code == codeNoMessage {
		return rawMsg{}, false, nil
	}
	if err != nil {
		return rawMsg{}, false, l.mapErr(err)
	}
	if resp.Message == nil {
		return rawMsg{}, false, fmt.Errorf("stream %s: message get answered without a message", l.stream)
	}
	return rawMsg{Subject: resp.Message.Subject, Seq: ledger.Seq(resp.Message.Seq), Data: resp.Message.Data}, true, nil
}

type msgGetRequest struct {
	Seq      uint64 `json:"seq,omitempty"`
	LastFor  string `json:"last_by_subj,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// directLast reads the last message of a subject with a direct get (served by any
// replica). ok is false when the subject has no message.
func (l *logDriver) directLast(ctx context.Context, subj string) (m rawMsg, ok bool, err error) {
	return l.directGet(ctx, msgGetRequest{LastFor: subj})
}

// directGet runs one direct get (served by any replica) answered by one
// message; ok is false when none matches.
func (l *logDriver) directGet(ctx context.Context, req msgGetRequest) (m rawMsg, ok bool, err error) {
	body, _ := json.Marshal(req)
	err = l.whileUnavailable(ctx, func(ctx context.Context) error {
		resp, err := l.rnc.RequestWithContext(ctx, apiPrefix+"DIRECT.GET."+l.stream, body)
		if err != nil {
			return err
		}
		if st, ok := directget.Status(resp); ok {
			if st == "404" {
				return nil
			}
			return fmt.Errorf("direct get on stream %s: status %s %s", l.stream, st, resp.Header.Get(hdrDescription))
		}
		if m, ok = l.storedMsg(resp); !ok {
			m, ok, err = l.settle(ctx, req)
		}
		return err
	})
	return m, ok, err
}

// unavailableRetry is the first wait before asking again a stream that had no
// responders.
const unavailableRetry = 10 * time.Millisecond

// whileUnavailable runs f, again while it finds no responders — as direct gets
// do while a stream elects a leader or, just created, sets up its replicas —
// within the per-request timeout (or ctx's deadline). A stream that does not
// exist is ledger.ErrNotFound at once.
func (l *logDriver) whileUnavailable(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	wait := unavailableRetry
	for {
		err := f(ctx)
		if !errors.Is(err, nats.ErrNoResponders) {
			return err
		}
		if _, berr := l.bounds(ctx); errors.Is(berr, ledger.ErrNotFound) {
			return berr
		}
		if ledger.SleepCtx(ctx, wait) != nil {
			return fmt.Errorf("stream %s: no responders (stream without a leader?): %w", l.stream, err)
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// storedMsg reads a stored message as the server hands it out (a direct
// get's answer): the stream, subject and seq the server states in the
// headers it adds (Nats-Stream, Nats-Subject, Nats-Sequence). It adds them
// after the headers the message was published with, so a publisher's own
// header of one of these names would stand first and be taken for the
// server's: ok is false unless each appears exactly once, the stream is this
// one, the seq is a number and no status is stated — then the caller asks
// the stream leader instead (settle), whose answer states them in JSON.
func (l *logDriver) storedMsg(msg *nats.Msg) (m rawMsg, ok bool) {
	if !directget.WholeHeader(msg) {
		return rawMsg{}, false
	}
	h := msg.Header
	one := func(key string) (string, bool) {
		v := h.Values(key)
		if len(v) != 1 {
			return "", false
		}
		return v[0], true
	}
	stream, ok1 := one(streamHeader)
	subj, ok2 := one(subjectHeader)
	seq, ok3 := one(sequenceHeader)
	if !ok1 || !ok2 || !ok3 || stream != l.stream || h.Get(hdrStatus) != "" {
		return rawMsg{}, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n == 0 {
		return rawMsg{}, false
	}
	return rawMsg{Subject: subj, Seq: ledger.Seq(n), Header: h, Data: msg.Data}, true
}

// settle asks the stream leader (STREAM.MSG.GET, whose answer is JSON: the
// seq and subject are the server's, whatever headers the message carries)
// for the message a direct get answered in a form storedMsg refuses, or at
// a seq its position says it cannot be at: the message at req.Seq, or the
// first of req.NextFor at or after it, or req.LastFor's last. ok is false
// when the leader holds none.
func (l *logDriver) settle(ctx context.Context, req msgGetRequest) (rawMsg, bool, error) {
	req.Batch, req.MaxBytes = 0, 0
	return l.leaderGet(ctx, req)
}

// Batched direct gets: one request, up to directBatchSize messages (and about
// directMaxBytes) in answer, then an end-of-batch status message.
const (
	directBatchSize = 1024
	directMaxBytes  = 8 << 20
)

// directBatch runs one batched direct get ($JS.API.DIRECT.GET.<stream>, server
// ≥ 2.11) and returns its messages with the server's count of matching messages
// left after them (Nats-Num-Pending of the end-of-batch marker). A 404 answer
// (nothing at or after req.Seq) is an empty batch. Unlike orbit.go's GetBatch, a
// timeout is an error, never a short batch. The batch is collected before the
// caller sees it, so a slow caller never makes the request time out.
func (l *logDriver) directBatch(ctx context.Context, req msgGetRequest) (msgs []rawMsg, pending uint64, err error) {
	b, err := l.newBatcher()
	if err != nil {
		return nil, 0, err
	}
	defer b.close()
	return b.get(ctx, req)
}

// batcher runs a sequence of batched direct gets over one subscription (a
// subscription costs a channel of nats.DefaultSubPendingMsgsLimit slots: too
// much to make per batch of a long read). Each request is answered on its own
// reply subject, so a late answer to an abandoned request (a timeout, a retry)
// is never taken for a later request's.
type batcher struct {
	l      *logDriver
	sub    *nats.Subscription
	prefix string
	n      uint64
}

func (l *logDriver) newBatcher() (*batcher, error) {
	prefix := l.rnc.NewInbox()
	sub, err := l.rnc.SubscribeSync(prefix + ".*")
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	return &batcher{l: l, sub: sub, prefix: prefix + "."}, nil
}

func (b *batcher) close() { _ = b.sub.Unsubscribe() }

// get is directBatch on b's subscription. A batch whose answers stopped
// coming (lost as the connection dropped, or later than the per-request
// timeout) is asked again, as request asks again an idempotent request whose
// answer was lost: at most readAttempts times in all, while ctx lasts.
func (b *batcher) get(ctx context.Context, req msgGetRequest) (msgs []rawMsg, pending uint64, err error) {
	wait := b.l.opts.retryWait
	for attempt := 1; ; attempt++ {
		err = b.l.whileUnavailable(ctx, func(ctx context.Context) error {
			msgs, pending, err = b.once(ctx, req)
			return err
		})
		if err == nil || ctx.Err() != nil || attempt >= readAttempts || !answerLost(err) {
			return msgs, pending, err
		}
		if ledger.SleepCtx(ctx, wait) != nil {
			return msgs, pending, err
		}
		wait = min(2*wait, maxRetryWait)
	}
}

func (b *batcher) once(ctx context.Context, req msgGetRequest) (msgs []rawMsg, pending uint64, err error) {
	reply, err := b.send(req)
	if err != nil {
		return nil, 0, err
	}
	return b.collect(ctx, reply, req)
}

// send publishes one request and returns the subject its answers come on.
// readAhead sends its next batch's request before that batch is wanted, so
// that the server works on it while the caller decodes the last one.
func (b *batcher) send(req msgGetRequest) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	b.n++
	reply := b.prefix + strconv.FormatUint(b.n, 10)
	return reply, b.l.rnc.PublishMsg(&nats.Msg{Subject: apiPrefix + "DIRECT.GET." + b.l.stream, Reply: reply, Data: body})
}

// collect gathers the answers to req, answered on reply, through its
// end-of-batch marker. Each message must be where the request puts it — at
// the seq after the one before (from req.Seq), or, by subject, after it and
// on req.NextFor when that names one subject — and read cleanly (storedMsg);
// one that is not is asked of the stream leader (settle): the stream's own
// gaps the caller reports, a publisher's headers never move a message.
func (b *batcher) collect(ctx context.Context, reply string, req msgGetRequest) (msgs []rawMsg, pending uint64, err error) {
	l := b.l
	cursor := ledger.Seq(max(req.Seq, 1)) // where the next message is due
	exact := req.NextFor != "" && !strings.ContainsAny(req.NextFor, "*>")
	for {
		msg, err := b.sub.NextMsgWithContext(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
				err = fmt.Errorf("direct get on stream %s after %d messages: %w (%w)", l.stream, len(msgs), nats.ErrTimeout, err)
			}
			return nil, 0, err
		}
		if msg.Subject != reply {
			continue // an answer to an earlier, abandoned request
		}
		if st, ok := directget.Status(msg); ok {
			switch st {
			case "204": // end of batch
				p, _ := strconv.ParseUint(msg.Header.Get(hdrNumPending), 10, 64)
				return msgs, p, nil
			case "404":
				return msgs, 0, nil
			case "503":
				return nil, 0, nats.ErrNoResponders
			default:
				return nil, 0, fmt.Errorf("direct get on stream %s: status %s %s", l.stream, st, msg.Header.Get(hdrDescription))
			}
		}
		m, ok := l.storedMsg(msg)
		gap := ok && req.NextFor == "" && req.LastFor == "" && m.Seq > cursor
		if !ok || gap || m.Seq < cursor || exact && m.Subject != req.NextFor {
			s, found, err := l.settle(ctx, msgGetRequest{Seq: uint64(cursor), NextFor: req.NextFor})
			switch {
			case err != nil:
				return nil, 0, err
			case found:
				m = s
			case !gap:
				return nil, 0, fmt.Errorf("direct get on stream %s: an answer the stream leader does not hold at or after seq %d: %w", l.stream, cursor, ledger.ErrInvalid)
			}
			// else: a gap of the stream's own before m, the caller reports it
		}
		msgs = append(msgs, m)
		cursor = m.Seq + 1
	}
}

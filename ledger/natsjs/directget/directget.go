// Package directget reads a JetStream stream's stored messages by direct
// gets ($JS.API.DIRECT.GET.<stream>, server ≥ 2.11): listings that hold no
// state on the server — no consumer, ordered or durable, whatever the number
// of readers — and that a reader cannot exhaust or move for another. The
// NATS adapter lists its key-value buckets and dead letters with it, and the
// object store (ledger/natsblob) its metadata.
//
// Scan reads every message of a filter from a seq on (batched gets,
// next_by_subj); LastPerSubject reads the last message of each subject of a
// filter (multi_last: one point-in-time answer of up to 1,024 subjects,
// paged by seq; Scan past that). A listing is collected whole, each request
// answered on a reply subject of its own; a timeout is an error, never a
// short answer.
//
// The server adds a stored message's stream, subject and seq to its answer
// as headers, after the headers the message was published with; a publisher
// may write headers of the same names. So an answer is taken as the server
// states it only when each of those appears exactly once, names the stream,
// and sits where the request puts it (after the one before, on the filter);
// any other is asked of the stream leader ($JS.API.STREAM.MSG.GET, whose
// answer is JSON: the seq and subject are the server's).
package directget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Stream is a stream read by direct gets on a connection.
type Stream struct {
	Conn *nats.Conn
	Name string
	// Timeout bounds each request whose ctx has no earlier deadline
	// (DefaultTimeout when 0).
	Timeout time.Duration
	// Leader, for a stream that does not allow direct gets, makes Scan ask
	// the stream leader for one message at a time ($JS.API.STREAM.MSG.GET):
	// a request per message, and no state on the server either.
	Leader bool
}

// DefaultTimeout bounds a request when Stream.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// Msg is a stored message as the server states it.
type Msg struct {
	Subject string
	Seq     uint64
	Time    time.Time
	Header  nats.Header
	Data    []byte
}

// ErrTooMany is the server's answer to a multi_last request matching more
// subjects than it answers at once (413).
var ErrTooMany = errors.New("too many subjects for one multi_last answer")

// Per request: how many messages, and about how many bytes.
const (
	batchSize = 1024 // also the server's multi_last limit of subjects
	maxBytes  = 8 << 20
)

// request is the body of a direct get request (the server's
// JSApiMsgGetRequest, the fields used here).
type request struct {
	Seq       uint64   `json:"seq,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	LastFor   string   `json:"last_by_subj,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
}

// Scan calls fn for every message on a subject matching filter with seq ≥
// from, in seq order, until the server says none is left (messages stored
// meanwhile included). fn's error is returned as is.
func (s Stream) Scan(ctx context.Context, filter string, from uint64, fn func(Msg) error) error {
	cursor := max(from, 1)
	for s.Leader {
		m, ok, err := s.leaderNext(ctx, cursor, filter)
		switch {
		case err != nil:
			return fmt.Errorf("scan %s of stream %s: %w", filter, s.Name, err)
		case !ok:
			return nil
		}
		if err := fn(m); err != nil {
			return err
		}
		cursor = m.Seq + 1
	}
	for {
		msgs, pending, err := s.get(ctx, request{Seq: cursor, NextFor: filter, Batch: batchSize, MaxBytes: maxBytes}, filter)
		if err != nil {
			return fmt.Errorf("scan %s of stream %s: %w", filter, s.Name, err)
		}
		for _, m := range msgs {
			if err := fn(m); err != nil {
				return err
			}
			cursor = m.Seq + 1
		}
		if len(msgs) == 0 || pending == 0 {
			return nil
		}
	}
}

// LastPerSubject returns the last message of every subject matching filter,
// in seq order: multi_last requests, paged by seq (a key written between two
// pages shows in the later one, and the later message wins); a filter of
// more subjects than the server answers at once, or an answer that has to be
// asked of the leader, takes Scan, keeping each subject's last.
func (s Stream) LastPerSubject(ctx context.Context, filter string) ([]Msg, error) {
	var (
		out    []Msg
		cursor uint64 = 1
		index         = map[string]int{} // subject → its place in out
	)
	for {
		msgs, pending, err := s.get(ctx, request{Seq: cursor, MultiLast: []string{filter}, Batch: batchSize, MaxBytes: maxBytes}, filter)
		if errors.Is(err, ErrTooMany) || errors.Is(err, errSettled) {
			return s.lastByScan(ctx, filter)
		}
		if err != nil {
			return nil, fmt.Errorf("last messages of %s in stream %s: %w", filter, s.Name, err)
		}
		for _, m := range msgs {
			if i, ok := index[m.Subject]; ok {
				out[i] = m
			} else {
				index[m.Subject] = len(out)
				out = append(out, m)
			}
			cursor = m.Seq + 1
		}
		if len(msgs) == 0 || pending == 0 {
			return sortedBySeq(out), nil
		}
	}
}

// Last returns the last message on subject (a literal subject) as the
// server states it; ok is false when it has none. An answer not whole, or
// not on subject, is asked of the stream leader: a publisher's headers
// never name another seq (a key's revision), subject or time.
func (s Stream) Last(ctx context.Context, subject string) (Msg, bool, error) {
	if s.Leader {
		return s.leader(ctx, request{LastFor: subject})
	}
	body, err := json.Marshal(request{LastFor: subject})
	if err != nil {
		return Msg{}, false, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		msg, err := s.Conn.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.Name, body)
		if errors.Is(err, nats.ErrNoResponders) {
			select {
			case <-ctx.Done():
				return Msg{}, false, fmt.Errorf("stream %s: no responders (no such stream, or no leader): %w", s.Name, err)
			case <-time.After(wait):
				continue
			}
		}
		if err != nil {
			return Msg{}, false, fmt.Errorf("last message of %s in stream %s: %w", subject, s.Name, err)
		}
		if st, ok := Status(msg); ok {
			if st == "404" {
				return Msg{}, false, nil
			}
			return Msg{}, false, fmt.Errorf("direct get on stream %s: status %s %s", s.Name, st, msg.Header.Get("Description"))
		}
		if m, ok := s.read(msg); ok && m.Subject == subject {
			return m, true, nil
		}
		return s.leader(ctx, request{LastFor: subject})
	}
}

// At asks the stream leader for the message at seq (its answer is JSON: the
// subject and seq are the server's, whatever headers the message carries);
// ok is false when the stream holds none there.
func (s Stream) At(ctx context.Context, seq uint64) (Msg, bool, error) {
	return s.leader(ctx, request{Seq: seq})
}

// lastByScan is LastPerSubject by Scan.
func (s Stream) lastByScan(ctx context.Context, filter string) ([]Msg, error) {
	last := map[string]Msg{}
	err := s.Scan(ctx, filter, 1, func(m Msg) error {
		last[m.Subject] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Msg, 0, len(last))
	for _, m := range last {
		out = append(out, m)
	}
	return sortedBySeq(out), nil
}

func sortedBySeq(ms []Msg) []Msg {
	// Insertion order is nearly sorted: pages come in seq order, and only a
	// subject written again moves.
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j-1].Seq > ms[j].Seq; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
	return ms
}

// errSettled: a multi_last answer held a message that had to be asked of
// the leader, which cannot say which message is a subject's last: the
// listing is made by Scan instead.
var errSettled = errors.New("an answer asked of the stream leader")

// get sends one request and collects its answer: the messages and the
// server's count of matching messages after them. No responders (a stream
// electing a leader) is asked again within the timeout.
func (s Stream) get(ctx context.Context, req request, filter string) ([]Msg, uint64, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		msgs, pending, err := s.once(ctx, body, req, filter)
		if !errors.Is(err, nats.ErrNoResponders) {
			return msgs, pending, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("stream %s: no responders (no such stream, or no leader): %w", s.Name, err)
		case <-time.After(wait):
		}
	}
}

func (s Stream) once(ctx context.Context, body []byte, req request, filter string) ([]Msg, uint64, error) {
	inbox := s.Conn.NewInbox()
	sub, err := s.Conn.SubscribeSync(inbox)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, 0, err
	}
	if err := s.Conn.PublishMsg(&nats.Msg{Subject: "$JS.API.DIRECT.GET." + s.Name, Reply: inbox, Data: body}); err != nil {
		return nil, 0, err
	}
	var msgs []Msg
	cursor := max(req.Seq, 1)
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("direct get on stream %s after %d messages: %w (%w)", s.Name, len(msgs), nats.ErrTimeout, err)
			}
			return nil, 0, err
		}
		h := msg.Header
		if st, ok := Status(msg); ok {
			switch st {
			case "204": // end of the answer
				p, _ := strconv.ParseUint(h.Get("Nats-Num-Pending"), 10, 64)
				return msgs, p, nil
			case "404":
				return msgs, 0, nil
			case "413":
				return nil, 0, ErrTooMany
			case "503":
				return nil, 0, nats.ErrNoResponders
			default:
				return nil, 0, fmt.Errorf("direct get on stream %s: status %s %s", s.Name, st, h.Get("Description"))
			}
		}
		m, ok := s.read(msg)
		if !ok || m.Seq < cursor || !Matches(filter, m.Subject) {
			if len(req.MultiLast) > 0 {
				return nil, 0, errSettled
			}
			if m, ok, err = s.leaderNext(ctx, cursor, filter); err != nil {
				return nil, 0, err
			}
			if !ok {
				return nil, 0, fmt.Errorf("direct get on stream %s: an answer the stream leader does not hold on %s at or after seq %d", s.Name, filter, cursor)
			}
		}
		msgs = append(msgs, m)
		cursor = m.Seq + 1
	}
}

// stored reports whether h carries a header the server adds to a stored
// message (a status answer has none).
func stored(h nats.Header) bool {
	return h.Values("Nats-Stream") != nil || h.Values("Nats-Subject") != nil || h.Values("Nats-Sequence") != nil
}

// MaxHeaderValues bounds the header values of an answer taken as the
// server's (WholeHeader, Status): more, and the answer is asked of the stream
// leader. A stored message's publisher chooses its header block, and may put
// a blank line in it: nats.go's parser stops there, so the headers the server
// appends after the block (its stream, subject, seq and time) would be hidden,
// and the publisher's own shown instead. WholeHeader catches that by length:
// the block's length on the wire must be the length of what was parsed,
// written as the server writes headers. A publisher can make a parsed line
// longer written than sent by at most 2 bytes ("K:v\n" is sent, "K: v\r\n"
// written), and its status line and blank line by 1 each (a "\n" alone, a
// status run into its description): at most 2·values+3 bytes in all. What the
// server appends is never shorter than 89 bytes plus the stream's name
// ("Nats-Stream: S\r\n", "Nats-Subject: s\r\n", "Nats-Sequence: n\r\n",
// "Nats-Time-Stamp: " and at least 20 bytes of RFC 3339 time "\r\n"). So with
// at most 32 values (2·32+3 = 67 < 90) no padding of a hidden block can make
// it pass for whole; syncledger's own messages carry at most 13 (the
// publisher's message id, expected stream and seqs, batch id, sequence and
// commit; the server's six).
const MaxHeaderValues = 32

// MinServerHeaders is the least length of what the server appends to a
// stored message's header block in a direct get's answer or a republish, for
// a stream of a name this long (see MaxHeaderValues).
func MinServerHeaders(stream string) int {
	return len("Nats-Stream: \r\n") + len(stream) + len("Nats-Subject: x\r\n") + len("Nats-Sequence: 1\r\n") +
		len("Nats-Time-Stamp: 2006-01-02T15:04:05Z\r\n")
}

// block reports msg's status (nats.go parses a status line "NATS/1.0 404
// Message Not Found" into a Status and a Description header) and whether the
// headers nats.go parsed are its whole header block, of at most
// MaxHeaderValues values: the block's length on the wire equals the length of
// what was parsed, written as a server or nats.go writes headers ("NATS/1.0",
// the status and its description, then "Key: value" lines).
func block(msg *nats.Msg) (status string, whole bool) {
	wire := msg.Size() - len(msg.Subject) - len(msg.Reply) - len(msg.Data)
	h := msg.Header
	if len(h) == 0 {
		return "", wire == 0
	}
	n, values := len("NATS/1.0\r\n")+len("\r\n"), 0
	for k, vs := range h {
		if k == "Status" || k == "Description" {
			continue
		}
		for _, v := range vs {
			values++
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	st, desc := h.Values("Status"), h.Values("Description")
	switch {
	case len(st) > 1 || len(desc) > 1 || len(desc) == 1 && len(st) == 0:
		return "", false
	case len(st) == 1:
		status = st[0]
		n += len(" ") + len(status)
		if len(desc) == 1 {
			n += len(" ") + len(desc[0])
		}
	}
	return status, values <= MaxHeaderValues && wire == n
}

// WholeHeader reports whether the headers nats.go parsed from msg are its
// whole header block, of at most MaxHeaderValues values and no status line
// (see MaxHeaderValues): nats.go's parser stops at the first blank line, so
// a stored message whose own header block holds one would hide the headers
// the server adds after it (its stream, subject and seq) and show the
// publisher's instead: such a message is not whole, nor one whose headers
// were written otherwise, even padded to the length of what it hides.
func WholeHeader(msg *nats.Msg) bool {
	status, whole := block(msg)
	return whole && status == ""
}

// Status returns the status of a server's status answer (an end of batch,
// no message, too many subjects, no responders): a message without data,
// without the headers the server adds to a stored message, whose header
// block is whole (block). A stored message dressed as one — a publisher's
// status line over a hidden block — is not: ok is false, and the caller
// reads it as a stored message (and asks the leader for it).
func Status(msg *nats.Msg) (status string, ok bool) {
	if len(msg.Data) != 0 || stored(msg.Header) {
		return "", false
	}
	status, whole := block(msg)
	return status, whole && status != ""
}

// read takes an answer as the server states it: its header block whole,
// each of the server's headers in it exactly once, the stream this one, no
// status.
func (s Stream) read(msg *nats.Msg) (Msg, bool) {
	if !WholeHeader(msg) {
		return Msg{}, false
	}
	h := msg.Header
	one := func(key string) (string, bool) {
		v := h.Values(key)
		if len(v) != 1 {
			return "", false
		}
		return v[0], true
	}
	stream, ok1 := one("Nats-Stream")
	subj, ok2 := one("Nats-Subject")
	seq, ok3 := one("Nats-Sequence")
	ts, ok4 := one("Nats-Time-Stamp")
	if !ok1 || !ok2 || !ok3 || !ok4 || stream != s.Name || h.Get("Status") != "" {
		return Msg{}, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n == 0 {
		return Msg{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Msg{}, false
	}
	return Msg{Subject: subj, Seq: n, Time: t, Header: h, Data: msg.Data}, true
}

// bounded is ctx bounded by the stream's Timeout (DefaultTimeout when 0):
// one request's, however many attempts it makes.
func (s Stream) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// leaderNext asks the stream leader for the first message on filter at or
// after seq.
func (s Stream) leaderNext(ctx context.Context, seq uint64, filter string) (Msg, bool, error) {
	return s.leader(ctx, request{Seq: seq, NextFor: filter})
}

// leader asks the stream leader for the message req names.
func (s Stream) leader(ctx context.Context, req request) (Msg, bool, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Msg{}, false, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	resp, err := s.Conn.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.Name, body)
	if err != nil {
		return Msg{}, false, err
	}
	var r struct {
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return Msg{}, false, fmt.Errorf("stream %s message get: undecodable answer: %w", s.Name, err)
	}
	switch {
	case r.Error != nil && r.Error.ErrCode == 10037: // no message found
		return Msg{}, false, nil
	case r.Error != nil:
		return Msg{}, false, fmt.Errorf("stream %s message get: %s (%d)", s.Name, r.Error.Desc, r.Error.ErrCode)
	case r.Message == nil:
		return Msg{}, false, fmt.Errorf("stream %s message get: answered without a message", s.Name)
	}
	m := r.Message
	var h nats.Header
	if len(m.Header) > 0 {
		h, _ = nats.DecodeHeadersMsg(m.Header) // the publisher's, as stored
	}
	return Msg{Subject: m.Subject, Seq: m.Seq, Time: m.Time, Header: h, Data: m.Data}, true, nil
}

// Matches reports whether subject matches filter, NATS's way: tokens split
// on ".", "*" one token, a last ">" one or more.
func Matches(filter, subject string) bool {
	fs, ss := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range fs {
		switch {
		case f == ">" && i == len(fs)-1:
			return len(ss) > i
		case i >= len(ss):
			return false
		case f != "*" && f != ss[i]:
			return false
		}
	}
	return len(fs) == len(ss)
}

package natsjs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's own stream snapshot and restore ($JS.API.STREAM.SNAPSHOT.<stream>,
// $JS.API.STREAM.RESTORE.<stream>; nats-server's jetstream_api.go), spoken
// here on nats.go: the nats CLI's library for it (github.com/nats-io/jsm.go)
// links nats-server itself (its manager imports the server package), which
// the default syncledger binary keeps out (BENCHMARKS.md: 14 MB).
//
// Snapshot: the request names an inbox and a chunk size; the answer is the
// stream's configuration and state as the snapshot took them; then the server
// sends the archive (s2-compressed, server 2.15's NATSARC1 format) in chunks
// to the inbox, each of which may carry a reply subject the client answers at
// once — the server's flow control keeps at most a window of unanswered
// chunks in flight and gives up after a few seconds without an answer — and
// ends with an empty message (a Status header other than 204 is the server's
// error). Restore: the request carries that configuration and state and
// answers with a subject; the client sends the archive there in chunks, each
// a request the server answers (an error answer stops it), then an empty
// request, answered once the server has rebuilt the stream (a stream create
// answer: the restored state, or the error). A stream of the name must not
// exist.

// snapshotChunk is the chunk size asked of the server (jsm.go's, the nats
// CLI's, default).
const snapshotChunk = 128 << 10

// snapshotIdle bounds the wait for the server's next chunk: the server ends a
// snapshot whose client does not answer within its flow-control timeout (a few
// seconds), so a longer silence is a lost server.
const snapshotIdle = 30 * time.Second

// restoreFinish bounds the wait for the server to rebuild a restored stream
// from its archive, when ctx has no deadline.
const restoreFinish = time.Hour

// StreamSnapshot is a stream's snapshot as the server took it: its
// configuration and state (JSON, as the server answered them, to be handed
// back unchanged to a restore) and the archive's size.
type StreamSnapshot struct {
	Stream string          `json:"stream"`
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
	Bytes  int64           `json:"bytes"` // the archive's size
	// SHA256 is the archive's digest (hex), taken as it was written; absent
	// in backups taken before it was recorded.
	SHA256 string `json:"sha256,omitempty"`
}

// StreamState is the part of a snapshot's state a caller reads.
type StreamState struct {
	Msgs     uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// Stats reads the snapshot's state.
func (s StreamSnapshot) Stats() (StreamState, error) {
	var st StreamState
	err := json.Unmarshal(s.State, &st)
	return st, err
}

// snapshotStream writes a snapshot of stream (its durable consumers too when
// consumers is set) to w.
func snapshotStream(ctx context.Context, nc *nats.Conn, timeout time.Duration, stream string, consumers bool, w io.Writer) (StreamSnapshot, error) {
	out := StreamSnapshot{Stream: stream}
	fail := func(err error) (StreamSnapshot, error) {
		return out, fmt.Errorf("snapshot stream %s: %w", stream, err)
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return fail(err)
	}
	req, _ := json.Marshal(struct {
		DeliverSubject string `json:"deliver_subject"`
		NoConsumers    bool   `json:"no_consumers,omitempty"`
		ChunkSize      int    `json:"chunk_size,omitempty"`
	}{inbox, !consumers, snapshotChunk})
	var resp struct {
		apiResponse
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
	}
	if err := apiRequest(ctx, nc, timeout, apiPrefix+"STREAM.SNAPSHOT."+stream, req, &resp); err != nil {
		return fail(err)
	}
	out.Config, out.State = resp.Config, resp.State
	h := sha256.New()
	w = io.MultiWriter(w, h)
	for {
		mctx, cancel := context.WithTimeout(ctx, snapshotIdle)
		m, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			return fail(fmt.Errorf("no chunk from the server for %s: %w", snapshotIdle, err))
		}
		if len(m.Data) == 0 {
			if st := m.Header.Get(hdrStatus); st != "" && st != "204" {
				return fail(fmt.Errorf("the server ended it: %s %s", st, m.Header.Get(hdrDescription)))
			}
			out.SHA256 = hex.EncodeToString(h.Sum(nil))
			return out, nil
		}
		if m.Reply != "" {
			// At once: the server waits for it before it sends more.
			if err := m.Respond(nil); err != nil {
				return fail(err)
			}
		}
		n, err := w.Write(m.Data)
		out.Bytes += int64(n)
		if err != nil {
			return fail(err)
		}
	}
}

// restoreStream restores a stream from its snapshot: snap's configuration and
// state, and the archive read from r. The stream must not exist. It returns
// the restored stream's state as the server reports it.
func restoreStream(ctx context.Context, nc *nats.Conn, timeout time.Duration, snap StreamSnapshot, r io.Reader) (StreamState, error) {
	var st StreamState
	fail := func(err error) (StreamState, error) {
		return st, fmt.Errorf("restore stream %s: %w", snap.Stream, err)
	}
	req, _ := json.Marshal(struct {
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
	}{snap.Config, snap.State})
	var resp struct {
		apiResponse
		DeliverSubject string `json:"deliver_subject"`
	}
	if err := apiRequest(ctx, nc, timeout, apiPrefix+"STREAM.RESTORE."+snap.Stream, req, &resp); err != nil {
		return fail(err)
	}
	if resp.DeliverSubject == "" {
		return fail(errors.New("the server named no subject to send the archive to"))
	}
	chunk := make([]byte, min(64<<10, nc.MaxPayload()))
	for {
		n, err := io.ReadFull(r, chunk)
		if n > 0 {
			var ack apiResponse
			if aerr := apiRequest(ctx, nc, timeout, resp.DeliverSubject, chunk[:n], &ack); aerr != nil {
				return fail(aerr)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fail(err)
		}
	}
	var done struct {
		apiResponse
		State StreamState `json:"state"`
	}
	wait := timeout
	if _, ok := ctx.Deadline(); !ok {
		wait = restoreFinish
	} else {
		wait = 0 // ctx bounds it
	}
	if err := apiRequest(ctx, nc, wait, resp.DeliverSubject, nil, &done); err != nil {
		return fail(err)
	}
	return done.State, nil
}

// apiRequest sends one JetStream API request (or a snapshot protocol
// message) and decodes its JSON answer into v; an empty answer is no error.
// timeout bounds it when ctx has no deadline (0: ctx alone).
func apiRequest(ctx context.Context, nc *nats.Conn, timeout time.Duration, subj string, body []byte, v interface{ apiErr() *jetstream.APIError }) error {
	if _, ok := ctx.Deadline(); !ok && timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	m, err := nc.RequestWithContext(ctx, subj, body)
	if err != nil {
		return err
	}
	if len(m.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return fmt.Errorf("answer of %s: %w", subj, err)
	}
	if e := v.apiErr(); e != nil {
		return e
	}
	return nil
}

package natsjs

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// quarantines is a Log's copy of the ledger's quarantine notices (see
// ledger.Quarantine): every read first loads the notices stored up to its last
// seq, so that it skips a quarantined message it meets, however early.
type quarantines struct {
	mu   sync.Mutex
	next ledger.Seq                       // notices at seqs below next are loaded
	seqs map[ledger.Seq]ledger.Quarantine // quarantined seq → its (first) notice
}

// loadQuarantines reads the notices stored at seqs up to upto not read yet: one
// batched direct get by subject, answered empty when there are none.
func (l *logDriver) loadQuarantines(ctx context.Context, upto ledger.Seq) error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	subj := ledger.QuarantineSubject(l.name)
	rd := &ledger.MessageReader{Name: l.name, UUID: l.uuid}
	next := max(l.q.next, 1)
	for next <= upto {
		msgs, _, err := l.directBatch(ctx, msgGetRequest{Seq: uint64(next), NextFor: subj, Batch: directBatchSize, MaxBytes: directMaxBytes})
		if err != nil {
			return fmt.Errorf("read quarantine notices: %w", l.mapErr(err))
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.Seq > upto {
				break
			}
			if q, ok := rd.NoticeOf(m.Seq, m.Subject, m.Data); ok {
				if l.q.seqs == nil {
					l.q.seqs = map[ledger.Seq]ledger.Quarantine{}
				}
				if _, dup := l.q.seqs[q.Seq]; !dup {
					l.q.seqs[q.Seq] = q
				}
			}
		}
		last := msgs[len(msgs)-1].Seq
		if last >= upto {
			break
		}
		next = last + 1
	}
	l.q.next = max(l.q.next, upto+1)
	return nil
}

// quarantined returns a copy of the quarantined seqs loaded so far (nil if none).
func (l *logDriver) quarantined() map[ledger.Seq]ledger.Quarantine {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	if len(l.q.seqs) == 0 {
		return nil
	}
	return maps.Clone(l.q.seqs)
}

// Quarantines returns every quarantine notice of the ledger, by quarantined seq.
func (l *logDriver) Quarantines(ctx context.Context) (map[ledger.Seq]ledger.Quarantine, error) {
	if l.rep != nil {
		return l.rep.quarantines(ctx)
	}
	last, err := l.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.loadQuarantines(ctx, last); err != nil {
		return nil, fmt.Errorf("ledger %q: %w", l.name, err)
	}
	out := l.quarantined()
	if out == nil {
		out = map[ledger.Seq]ledger.Quarantine{}
	}
	return out, nil
}

// Quarantine stores a notice that the message at q.Seq is not an event any
// reader applies, and returns the notice's seq. It refuses (ErrInvalid) a seq
// the stream does not hold, a quarantine notice, a well-formed event unless
// force (a host may have applied it: quarantine one only when it breaks a rule
// the decoder cannot see — its chain or parts lie, its content is missing),
// and (ErrConflict) a seq already quarantined. The server lets only the admin
// role publish notices (natsauth); others get ErrPermission.
func (l *logDriver) Quarantine(ctx context.Context, q ledger.Quarantine, force bool) (ledger.Seq, error) {
	l.opened.drop()
	if l.rep != nil {
		if err := l.rep.writable(ctx, l.name); err != nil {
			return 0, fmt.Errorf("ledger %q quarantine seq %d: %w", l.name, q.Seq, err)
		}
		at := time.Now()
		seq, err := l.quarantine(ctx, q, force)
		if err == nil {
			l.rep.raise(seq, at)
		}
		return seq, err
	}
	return l.quarantine(ctx, q, force)
}

func (l *logDriver) quarantine(ctx context.Context, q ledger.Quarantine, force bool) (ledger.Seq, error) {
	fail := func(err error) (ledger.Seq, error) {
		return 0, fmt.Errorf("ledger %q quarantine seq %d: %w", l.name, q.Seq, err)
	}
	if q.At.IsZero() {
		q.At = time.Now()
	}
	b, err := l.bounds(ctx)
	if err != nil {
		return fail(err)
	}
	if q.Seq < b.First || q.Seq > b.Last {
		return fail(fmt.Errorf("the stream holds seqs %d..%d: %w", b.First, b.Last, ledger.ErrInvalid))
	}
	msgs, _, err := l.directBatch(ctx, msgGetRequest{Seq: uint64(q.Seq), Batch: 1})
	if err != nil {
		return fail(l.mapErr(err))
	}
	if len(msgs) != 1 || msgs[0].Seq != q.Seq {
		return fail(fmt.Errorf("the stream no longer holds it: %w", ledger.ErrInvalid))
	}
	if err := l.loadQuarantines(ctx, b.Last); err != nil {
		return fail(err)
	}
	q, data, err := ledger.NoticeFor(l.reader(), q, force, msgs[0].Subject, msgs[0].Data)
	if err != nil {
		return fail(err)
	}
	// The notice's message id holds a nonce: "quarantine/<seq>" alone is an
	// id any host could publish under first, within the stream's duplicate
	// window, and the server would drop the notice as its duplicate.
	m := nats.NewMsg(ledger.QuarantineSubject(l.name))
	m.Data = data
	m.Header.Set(jetstream.ExpectedStreamHeader, l.stream)
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("quarantine/%d.%s", q.Seq, newNonce()))
	pctx, cancel := l.reqCtx(ctx)
	defer cancel()
	ack, err := l.js.PublishMsg(pctx, m)
	if err != nil {
		if perr := l.permissionDenied(); perr != nil {
			return fail(perr)
		}
		return fail(l.refusal(ctx, err))
	}
	if ack.Duplicate {
		// Only this notice's own earlier send can hold its id; the leader
		// says whether the message there is it.
		got, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: ack.Sequence})
		if err != nil {
			return fail(err)
		}
		if !ok || got.Subject != m.Subject || !bytes.Equal(got.Data, data) {
			return fail(fmt.Errorf("the server answered that seq %d holds the notice's message id, and holds something else there: %w", ack.Sequence, ledger.ErrConflict))
		}
	}
	return ledger.Seq(ack.Sequence), nil
}

// skipQuarantined handles a chain conflict whose partition's subject holds,
// after what part i expects, only quarantined messages: they are no part of
// the chain (the event's Prev stays the partition's last event), but the
// server's last-subject-sequence check counts them, so the publish must expect
// the last of them. It reports whether it moved c.expect (then publish again).
// Any event among them is a real conflict: false.
func (l *logDriver) skipQuarantined(ctx context.Context, c *commit, cf *ledger.ConflictError) (bool, error) {
	i := slices.IndexFunc(c.events, func(e ledger.Event) bool { return e.Partition == cf.Partition })
	if i < 0 || cf.Actual <= c.expect[i] {
		return false, nil
	}
	b, err := l.bounds(ctx)
	if err != nil {
		return false, err
	}
	if err := l.loadQuarantines(ctx, max(b.Last, cf.Actual)); err != nil {
		return false, err
	}
	q := l.quarantined()
	if _, ok := q[cf.Actual]; !ok {
		return false, nil // the last message is not quarantined: a real conflict
	}
	for next := c.expect[i] + 1; next <= cf.Actual; {
		msgs, _, err := l.directBatch(ctx, msgGetRequest{Seq: uint64(next), NextFor: c.subjects[i], Batch: directBatchSize, MaxBytes: directMaxBytes})
		if err != nil {
			return false, l.mapErr(err)
		}
		if len(msgs) == 0 {
			return false, nil
		}
		for _, m := range msgs {
			if m.Seq > cf.Actual {
				break
			}
			if _, ok := q[m.Seq]; !ok {
				return false, nil // an event of the partition since: a real conflict
			}
			next = m.Seq + 1
		}
		if msgs[len(msgs)-1].Seq >= cf.Actual {
			break
		}
	}
	c.expect[i] = cf.Actual
	return true, nil
}

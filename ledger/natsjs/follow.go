package natsjs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/directget"
)

// DefaultFollowIdle is how long a follower waits without hearing from the
// stream before it asks for the stream's head (WithFollowIdle).
const DefaultFollowIdle = 5 * time.Second

// followTick is how often a waiting follower looks at its subscription's
// dropped-message count and its connection's reconnect count (local
// counters: no request).
const followTick = 250 * time.Millisecond

// followPendingMsgs and followPendingBytes bound what a follower's
// subscription holds that fn has not taken yet: a follower further behind
// than that (a slow fn, a burst of commits) loses the rest of the republish,
// and reads it by direct gets once it has caught up with what it holds.
const (
	followPendingMsgs  = 16384
	followPendingBytes = 64 << 20
)

// WithFollowIdle sets how long a follower waits without a republished
// message before it asks the stream for its head, one stream info request
// (default DefaultFollowIdle, each wait drawn within ±20% of it so a fleet's
// followers do not ask together). The republish is best effort; this bounds
// how late a follower delivers a record whose republish it missed and that
// no later record revealed.
func WithFollowIdle(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("follow idle %v: must be positive: %w", d, ledger.ErrInvalid)
		}
		o.followIdle = d
		return nil
	}
}

// Follow calls fn for every record from seq from on, in order, waiting for
// new ones, until ctx is done (returning ctx.Err()) or fn returns an error
// (returned as is). It holds no state on the server: no consumer, only a
// subscription to the stream's republish of what it stores
// (StoredSubjects), which it makes first; then it reads from from to the
// stream's head with batched direct gets (Read: the first-seq, contiguity
// and decoding checks), and then delivers the republished messages, each
// only if its seq (Nats-Sequence, as the server states it) is the next one
// due. A republish is best effort — the stream leader sends it once, and a
// subscriber that is slow (its pending buffer full) or reconnecting loses
// it — so whatever breaks the sequence falls back to direct gets from the
// next seq due: a seq past it (a gap), a dropped message or a reconnect
// seen on the local counters, a republished message that does not read
// cleanly, and an idle period (WithFollowIdle: then one stream info request
// asks for the head). A stream whose first seq moved past the next seq due
// is a *ledger.TruncatedError, one whose last seq went below what was
// delivered ErrRewound, one recreated under the same name ErrLineage: never a
// silent skip.
func (l *logDriver) Follow(ctx context.Context, from ledger.Seq, fn func(ledger.Record) error) error {
	nc := l.followConn()
	f := &follower{l: l, nc: nc, fn: fn, from: from, next: from}
	sub, err := nc.SubscribeSync(StoredSubjects(l.name))
	if err == nil {
		err = sub.SetPendingLimits(l.opts.followPending, followPendingBytes)
	}
	if err == nil {
		// The server has the subscription once it answers a ping: whatever
		// it stores after the head read below is republished to it.
		fctx, cancel := l.reqCtx(ctx)
		err = nc.FlushWithContext(fctx)
		cancel()
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ledger %q follow: subscribe to %s: %w", l.name, StoredSubjects(l.name), unreachable(nc, err))
	}
	defer func() { _ = sub.Unsubscribe() }()
	f.sub = sub
	f.lost() // the counters as they are now
	if err := f.catchUp(ctx); err != nil {
		return err
	}
	heard, idle := time.Now(), f.idle()
	for {
		wctx, cancel := context.WithTimeout(ctx, followTick)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, nats.ErrSlowConsumer):
			// The client dropped messages past the pending limit: read
			// what it dropped from the stream.
			f.lost()
			if err := f.catchUp(ctx); err != nil {
				return err
			}
			heard, idle = time.Now(), f.idle()
			continue
		case errors.Is(err, context.DeadlineExceeded):
			if f.lost() || time.Since(heard) >= idle {
				if err := f.catchUp(ctx); err != nil {
					return err
				}
				heard, idle = time.Now(), f.idle()
			}
			continue
		case err != nil:
			return fmt.Errorf("ledger %q follow at seq %d: %w", l.name, f.next, unreachable(nc, err))
		}
		heard = time.Now()
		if err := f.offer(ctx, msg); err != nil {
			return err
		}
	}
}

// follower is one Follow's state.
type follower struct {
	l          *logDriver
	nc         *nats.Conn // the connection of its subscription
	fn         func(ledger.Record) error
	sub        *nats.Subscription
	from       ledger.Seq // the first seq asked for
	next       ledger.Seq // the seq due
	dropped    int        // the subscription's dropped count last seen
	reconnects uint64     // the connection's reconnect count last seen
}

// followConn is the connection a follower subscribes on: the read
// connection (through a mirror: the mirror's server, where the origin's
// republish arrives over the leaf node).
func (l *logDriver) followConn() *nats.Conn {
	if l.rep != nil {
		return l.rep.m.nc
	}
	return l.rnc
}

// idle returns the next idle wait: the Log's, within ±20%.
func (f *follower) idle() time.Duration {
	d := f.l.opts.followIdle
	if !f.l.republish {
		// Nothing is republished: the head is all there is to hear.
		return followTick
	}
	return d - d/5 + rand.N(2*d/5+1)
}

// lost reports whether the subscription may have lost messages since it was
// last asked: the client dropped some (a slow consumer), or the connection
// reconnected (the server sent nothing meanwhile).
func (f *follower) lost() bool {
	d, _ := f.sub.Dropped()
	r := f.nc.Stats().Reconnects
	changed := d != f.dropped || r != f.reconnects
	f.dropped, f.reconnects = d, r
	return changed
}

// deliver hands r to fn and moves the seq due past it.
func (f *follower) deliver(r ledger.Record) error {
	if err := f.fn(r); err != nil {
		return err
	}
	f.next = r.Seq + 1
	return nil
}

// catchUp reads from the seq due to the stream's head by direct gets, after
// checking that the stream did not go back below what was delivered.
func (f *follower) catchUp(ctx context.Context) error {
	l := f.l
	b, err := l.viewBounds(ctx)
	if err == nil && l.rep != nil && f.next > f.from && b.Last+1 < f.next {
		// The mirror is behind what the origin's republish delivered: only
		// the origin says whether the stream went back.
		var h ledger.Head
		if h, err = l.rep.head(ctx, ledger.HeadRequest{Origin: true}); err == nil {
			b.Last = max(b.Last, h.Seq)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ledger %q follow: %w", l.name, err)
	}
	if f.next > f.from && b.Last+1 < f.next { // (a from past the head waits for it)
		return fmt.Errorf("ledger %q follow: seq %d delivered, but the stream's last seq went back to %d (stream recreated or restored?): %w", l.name, f.next-1, b.Last, ledger.ErrRewound)
	}
	if l.rep != nil {
		if f.next > b.Last {
			return nil
		}
		err = l.rep.read(ctx, f.next, b.Last, f.deliver)
	} else {
		err = l.readIn(ctx, b, f.next, 0, f.deliver)
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// offer delivers a republished message if it is the seq due and reads
// cleanly; anything else is left to a catch-up by direct gets, which reads
// the stream itself (and reports a message that does not decode, precisely).
func (f *follower) offer(ctx context.Context, msg *nats.Msg) error {
	m, ok := f.l.storedOf(msg)
	switch {
	case ok && m.Seq < f.next:
		return nil // delivered by a catch-up already
	case !ok, m.Seq > f.next, f.lost():
		return f.catchUp(ctx)
	}
	r, err := f.l.decode(m)
	if err != nil {
		return f.catchUp(ctx)
	}
	return f.deliver(r)
}

// storedOf reads a message of the stream's republish: the stream, subject
// and seq the server states (Nats-Stream, Nats-Subject, Nats-Sequence).
// These headers follow the ones the message was published with, so a
// publisher's own header of the same name would stand before them: ok is
// false unless each appears exactly once, names this stream, and the
// subject is the one the republish subject was made from (which the server,
// not the publisher, chose), and for a server's status answer.
func (l *logDriver) storedOf(msg *nats.Msg) (rawMsg, bool) {
	if !directget.WholeHeader(msg) {
		return rawMsg{}, false
	}
	h := msg.Header
	one := func(key string) (string, bool) {
		v := h.Values(key)
		return strings.Join(v, ","), len(v) == 1
	}
	stream, ok1 := one(streamHeader)
	subj, ok2 := one(subjectHeader)
	seq, ok3 := one(sequenceHeader)
	if !ok1 || !ok2 || !ok3 || stream != l.stream || h.Get(hdrStatus) != "" {
		return rawMsg{}, false
	}
	token, ok := strings.CutPrefix(msg.Subject, StoredPrefix(l.name))
	if !ok || subj != l.prefix+token {
		return rawMsg{}, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n == 0 {
		return rawMsg{}, false
	}
	return rawMsg{Subject: subj, Seq: ledger.Seq(n), Header: h, Data: msg.Data}, true
}

// The headers the server adds to a stored message it hands out (a direct
// get's answer, a republish).
const (
	streamHeader   = "Nats-Stream"
	subjectHeader  = "Nats-Subject"
	sequenceHeader = "Nats-Sequence"
)

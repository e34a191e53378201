package natsjs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// TakeFence stores rec on its lock's fence subject (see ledger.CommitLog):
// one publish with Nats-Msg-Id ledger.FenceRecordID(rec) and no expectation,
// sent again after an answer that leaves its outcome unknown (a timeout, a
// lost connection): the server answers a retry of a stored record as a
// duplicate, with its seq, so rec is stored once and its seq is returned.
// The fence records of a lock are its takings: the last one is its holder's
// fence, which a fenced Append expects (append.go).
func (l *logDriver) TakeFence(ctx context.Context, rec ledger.FenceRecord, b []byte) (ledger.Seq, error) {
	l.opened.drop()
	fail := func(err error) error { return fmt.Errorf("ledger %q take fence of lock %q: %w", l.name, rec.Lock, err) }
	subj := ledger.FenceSubject(l.name, rec.Lock)
	if len(subj) > MaxSubjectLen {
		return 0, fail(fmt.Errorf("subject of %d bytes, limit %d: %w", len(subj), MaxSubjectLen, ledger.ErrTooLarge))
	}
	m := nats.NewMsg(subj)
	m.Data = b
	m.Header.Set(jetstream.MsgIDHeader, ledger.FenceRecordID(rec))
	m.Header.Set(jetstream.ExpectedStreamHeader, l.stream)
	wait := l.opts.retryWait
	for attempt := 1; ; attempt++ {
		rctx, cancel := l.reqCtx(ctx)
		seq, err := l.publishOne(rctx, m)
		cancel()
		var dup errDuplicateAck
		switch {
		case err == nil:
			return seq, nil
		case errors.As(err, &dup):
			return ledger.Seq(dup.seq), nil // stored by an earlier attempt
		}
		if perr := l.permissionDenied(); perr != nil {
			return 0, fail(perr) // never stored
		}
		if ctx.Err() != nil {
			return 0, fail(fmt.Errorf("%w: %w", ErrOutcomeUnknown, unreachable(l.nc, context.Cause(ctx))))
		}
		if refused(err) {
			return 0, fail(l.refusal(ctx, err))
		}
		if attempt >= l.opts.attempts {
			return 0, fail(fmt.Errorf("%d attempts: %w: %w", attempt, ErrOutcomeUnknown, unreachable(l.nc, err)))
		}
		if err := ledger.SleepCtx(ctx, wait+rand.N(wait/2+1)); err != nil {
			return 0, fail(fmt.Errorf("%w: %w", ErrOutcomeUnknown, err))
		}
		wait = min(2*wait, maxRetryWait)
	}
}

// RaiseFormat raises the ledger's log format (the stream's syncledger.format)
// to ledger.LogFormat, the admin's step once every reader of the ledger runs
// a release that reads it: builds that do not then refuse the ledger, saying
// to upgrade, rather than stop at a record they cannot read (a fence).
// Nothing else changes; a log already at the format is left as it is. It
// returns the format the ledger had. Only the admin may (ledger.ErrPermission
// otherwise). The Log keeps the format it was opened with: open it again.
func (l *Log) RaiseFormat(ctx context.Context) (int, error) { return l.d.raiseFormat(ctx) }

func (l *logDriver) raiseFormat(ctx context.Context) (int, error) {
	var had int
	err := l.updateMeta(ctx, func(md map[string]string) bool {
		f, err := strconv.Atoi(md[MetaFormat])
		if had == 0 {
			had = f
		}
		return err == nil && f >= ledger.LogFormat
	}, func(md map[string]string) { md[MetaFormat] = strconv.Itoa(ledger.LogFormat) })
	if err != nil {
		return had, fmt.Errorf("ledger %q: raise its log format to %d: %w", l.name, ledger.LogFormat, err)
	}
	return had, nil
}

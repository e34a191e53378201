package natsjs

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
)

// The server's refusals, read in one place.
//
// A publish or a subscription the server's permissions refuse gets no answer:
// the server reports it on the connection, asynchronously ("-ERR 'Permissions
// Violation for Publish to "SUBJECT"'"), and the request that sent it waits
// for its timeout. refusalOf turns that report into a *ledger.PermissionError
// (the verb and the subject as fields); nothing else in this module reads its
// text. A Client routes each report to the operation that caused it — one run
// under guard whose subjects match — which then fails at once with it; a
// report no operation claims goes to Config.Refused. A Log opened on a bare
// connection (OpenLog) reads the connection's last report instead, after its
// publish failed (lastRefusal).

// violationRe finds the verb and the subject in the server's report.
var violationRe = regexp.MustCompile(`(?i)for (publish|subscription) to "([^"]+)"`)

// refusalOf returns the refusal err reports, if it is a permissions violation.
func refusalOf(err error) (*ledger.PermissionError, bool) {
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return nil, false
	}
	m := violationRe.FindStringSubmatch(err.Error())
	if m == nil {
		return &ledger.PermissionError{Err: err}, true
	}
	verb := "publish"
	if strings.EqualFold(m[1], "subscription") {
		verb = "subscribe"
	}
	return &ledger.PermissionError{Verb: verb, Subject: m[2], Err: err}, true
}

// lastRefusal returns the connection's last asynchronous error as a refusal
// if it is one and match(subject) holds.
func lastRefusal(nc *nats.Conn, match func(subject string) bool) *ledger.PermissionError {
	pe, ok := refusalOf(nc.LastError())
	if !ok || !match(pe.Subject) {
		return nil
	}
	return pe
}

// isCleanup reports whether a refused subject is a consumer delete sent, best
// effort, to clean up after an ordered consumer (nats.go's; no reader of this
// package holds one any more): only the admin may delete consumers
// (natsauth), and the server drops an idle ordered consumer anyway, so that
// refusal fails nothing.
func isCleanup(subject string) bool {
	return strings.HasPrefix(subject, apiPrefix+"CONSUMER.DELETE.")
}

// bucketSubjects returns whether a subject is one of key-value bucket b's:
// its stream's API ("$JS.API.….KV_B[.…]") or its keys ("$KV.B.…").
func bucketSubjects(b string) func(string) bool {
	stream := KVStream(b)
	return func(subject string) bool {
		for tok := range strings.SplitSeq(subject, ".") {
			if tok == b || tok == stream {
				return true
			}
		}
		return false
	}
}

// watches routes refusals to the operations watching their subjects.
type watches struct {
	mu   sync.Mutex
	next int
	m    map[int]watch
}

type watch struct {
	match  func(subject string) bool
	cancel context.CancelCauseFunc
}

// guard returns ctx, ended with the refusal as its cause when the server
// refuses an operation on a subject match holds for while it lives; done
// stops the watch.
func (w *watches) guard(ctx context.Context, match func(string) bool) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w.mu.Lock()
	id := w.next
	w.next++
	if w.m == nil {
		w.m = map[int]watch{}
	}
	w.m[id] = watch{match: match, cancel: cancel}
	w.mu.Unlock()
	return ctx, func() {
		w.mu.Lock()
		delete(w.m, id)
		w.mu.Unlock()
		cancel(nil)
	}
}

// route hands pe to the operations watching its subject and reports whether
// any was.
func (w *watches) route(pe *ledger.PermissionError) bool {
	if pe.Subject == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	found := false
	for _, wa := range w.m {
		if wa.match(pe.Subject) {
			wa.cancel(pe)
			found = true
		}
	}
	return found
}

// refusalCause is err, or the refusal that ended ctx (guard) if one did.
func refusalCause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		var pe *ledger.PermissionError
		if cause := context.Cause(ctx); errors.As(cause, &pe) {
			return pe
		}
	}
	return err
}

// guarded runs op under w's guard for match; a refusal is its error.
func guarded[T any](w *watches, match func(string) bool, ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	if w == nil {
		return op(ctx)
	}
	ctx, done := w.guard(ctx, match)
	defer done()
	v, err := op(ctx)
	return v, refusalCause(ctx, err)
}

package main

import (
	"context"
	"regexp"
	"sync"

	"github.com/syncledger/syncledger/ledger"
)

// refusals routes the server's refusals of this connection's operations
// (natsAsyncError) to the operations that watch for them (watchRefusals),
// so that a refusal fails the operation it refused, at once, rather than
// ending the command: the swamp agent serves many requests, and a refused
// one must not cancel the others. A refusal nobody watches ends the command.
type refusals struct {
	mu      sync.Mutex
	next    int
	watches map[int]refusalWatch
}

type refusalWatch struct {
	match  *regexp.Regexp // the subjects watched
	cancel context.CancelCauseFunc
	why    func(verb, subject string) error
}

// refusedRe finds the refused subject in the server's message ("Permissions
// Violation for Publish to \"SUBJECT\"").
var refusedRe = regexp.MustCompile(`(?i)for (publish|subscription) to "([^"]+)"`)

// watchRefusals returns ctx, ended with cause why(verb, subject) when the
// server refuses an operation on a subject match matches while it lives; done
// stops the watch.
func (a *app) watchRefusals(ctx context.Context, match *regexp.Regexp, why func(verb, subject string) error) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	r := a.refused
	r.mu.Lock()
	id := r.next
	r.next++
	if r.watches == nil {
		r.watches = map[int]refusalWatch{}
	}
	r.watches[id] = refusalWatch{match: match, cancel: cancel, why: why}
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.watches, id)
		r.mu.Unlock()
		cancel(nil)
	}
}

// refusal hands a refusal to the operations watching its subject, and says
// whether any was.
func (a *app) refusal(msg string) bool {
	m := refusedRe.FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	r := a.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	found := false
	for _, w := range r.watches {
		if w.match.MatchString(m[2]) {
			w.cancel(w.why(m[1], m[2]))
			found = true
		}
	}
	return found
}

// refusingKV is a key-value bucket whose operations fail with the server's
// refusal of their subjects (watchRefusals) rather than wait for a timeout.
type refusingKV struct {
	ledger.KV
	guard func(context.Context) (context.Context, func())
}

// refused is err, or the refusal that ended ctx (watchRefusals) if one did.
func refused(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != ctx.Err() {
			return cause
		}
	}
	return err
}

// bucketSubjects matches the subjects of key-value bucket b: its stream's API
// ("…KV_B…") and its keys ("$KV.B.…").
func bucketSubjects(b string) *regexp.Regexp {
	return regexp.MustCompile(`(^|\.)(KV_)?` + regexp.QuoteMeta(b) + `(\.|$)`)
}

// guarded runs op under k's guard; a refusal is its error.
func guarded[T any](k refusingKV, ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	ctx, done := k.guard(ctx)
	defer done()
	v, err := op(ctx)
	return v, refused(ctx, err)
}

func (k refusingKV) Get(ctx context.Context, key string) (ledger.KVEntry, error) {
	return guarded(k, ctx, func(ctx context.Context) (ledger.KVEntry, error) { return k.KV.Get(ctx, key) })
}

func (k refusingKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return guarded(k, ctx, func(ctx context.Context) (uint64, error) { return k.KV.Put(ctx, key, value) })
}

func (k refusingKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return guarded(k, ctx, func(ctx context.Context) (uint64, error) { return k.KV.Create(ctx, key, value) })
}

func (k refusingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	return guarded(k, ctx, func(ctx context.Context) (uint64, error) { return k.KV.Update(ctx, key, value, last) })
}

func (k refusingKV) Delete(ctx context.Context, key string, last uint64) error {
	_, err := guarded(k, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, k.KV.Delete(ctx, key, last) })
	return err
}

func (k refusingKV) List(ctx context.Context, prefix string) ([]ledger.KVEntry, error) {
	return guarded(k, ctx, func(ctx context.Context) ([]ledger.KVEntry, error) { return k.KV.List(ctx, prefix) })
}

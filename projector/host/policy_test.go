package host

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// The push's one policy tells the failures apart: a chain conflict (retried
// after a catch-up), a conflict over paths (settled or returned), a lost
// lock, a refusal and no answer (returned at once) — wrapped however the
// stages wrap them; and what the push does with each (advance).
func TestPolicyClassify(t *testing.T) {
	t.Parallel()
	lost := &ledger.LockLostError{Lock: "data/t/m/.lock", Fence: 3, Last: 5}
	chain := &ledger.ConflictError{Partition: "data/t/m", Expected: 4, Actual: 6}
	paths := &ConflictError{Paths: []string{"data/t/m/d/1/raw"}}
	wait := &WaitError{Wait: Wait{Op: "commit", On: "log", What: "to take the commit", For: time.Second}, Err: errors.New("no answer")}
	for _, tc := range []struct {
		err  error
		want failure
	}{
		{nil, failNone},
		{chain, failChain},
		{fmt.Errorf("commit: %w", chain), failChain},
		{paths, failPaths},
		{lost, failLockLost},
		{fmt.Errorf("append: %w", lost), failLockLost},
		{&PartialCommitError{Published: []CommitPart{{Commit: "c1"}}, Err: lost}, failLockLost},
		{ledger.ErrLockLost, failLockLost},
		{fmt.Errorf("put blob: %w", ledger.ErrPermission), failRefused},
		{ledger.ErrInvalid, failRefused},
		{ledger.ErrTooLarge, failRefused},
		{&ledger.ServerFullError{}, failRefused},
		{ledger.ErrServerFull, failRefused},
		{ledger.ErrNotFound, failRefused},
		{ledger.ErrChecksum, failRefused},
		{wait, failUnreachable},
		{fmt.Errorf("connect: %w", ledger.ErrUnreachable), failUnreachable},
		{ledger.ErrOutcomeUnknown, failUnreachable},
		{&LocalChangesError{Paths: []string{"a"}}, failOther},
		{errors.New("disk on fire"), failOther},
	} {
		if got := (Policy{}).classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}

	// What the push does next, for each.
	settle := func(p *push) { p.opt.Settle = func(context.Context, *ConflictError) error { return nil } }
	for _, tc := range []struct {
		name       string
		err        error
		conflicted bool
		opt        func(*push)
		want       step
	}{
		{"published", nil, false, nil, stepDone},
		{"chain conflict", chain, true, nil, stepCatchUp},
		{"path conflict, no Settle", paths, false, nil, stepFail},
		{"path conflict, Settle", paths, false, settle, stepSettle},
		{"lock lost", lost, false, settle, stepFail},
		{"refused", ledger.ErrPermission, false, settle, stepFail},
		{"unreachable", wait, false, settle, stepFail},
	} {
		p := newPush(CommitOptions{}, Policy{}, 0)
		if tc.opt != nil {
			tc.opt(p)
		}
		p.next()
		o := outcome{err: tc.err}
		if tc.conflicted {
			o.conflicted = []ledger.Entry{{Path: "data/t/m/x"}}
		}
		if got, err := p.advance(o, 1, 1); got != tc.want || (tc.want == stepFail && !errors.Is(err, tc.err)) {
			t.Errorf("%s: advance = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

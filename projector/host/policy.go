package host

import (
	"errors"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Defaults of Policy.
const (
	DefaultWait   = 60 * time.Second
	DefaultReport = 3 * time.Second
)

// Policy is a push's one retry policy (Config.Policy): which failures a
// Commit retries and how often. The zero value is the default.
//
// The worst case of one push is stated here: it publishes each of its
// commits at most Conflicts times and settles at most Settles conflicts;
// and whatever the stores below retry (natsjs's publishes, a Bucket's
// attempts), once it has gone Wait without progress — no answer, or only
// failures that are retried — it gives up, within a quarter of Report more
// (TestPushBoundRefusals, TestPushServerNeverAnswers,
// TestPushBlobStoreNeverAnswers). A lost lock, a refusal for a full disk,
// a permission are never retried. Only progress extends it: content taken,
// publishes acknowledged, events read.
//
// The policy tells the failures apart in one place (classify, a failure
// kind each; TestPolicyClassify): a chain conflict is retried, a conflict
// over paths settled (CommitOptions.Settle) or returned, a lost lock, a
// refusal and no answer returned at once.
type Policy struct {
	// Conflicts is the most times one commit of a push is published: after
	// each chain conflict (another host extended a partition it touches) the
	// push reads the partitions' new commits, and, when none changed a path
	// it changes, plans its group again and publishes after a backoff of n ×
	// 1–7 ms (n the conflicts so far; the jitter keeps two hosts fighting over
	// one partition from retrying in lockstep). 0 means 20.
	Conflicts int
	// Settles is the most conflicts a push settles (CommitOptions.Settle:
	// swamp's renumbering), each followed by a scan of its whole scope. 0
	// means 3.
	Settles int
	// Wait is the longest an operation that reaches the ledger — a push, a
	// pull, a fetch — waits for an answer, from the ledger's server or the
	// blob store, without any coming (wait.go): then it gives up, with a
	// *WaitError. 0 means DefaultWait. Each request to the blob store is
	// given a third of it (its AttemptTimeout: for a put, with none of the
	// content taken or sent), so a lost one is asked again within it.
	Wait time.Duration
	// Report is how long a wait lasts before the operation says what it
	// waits for (Config.Waiting), and a quarter of how often it says it
	// again. 0 means DefaultReport.
	Report time.Duration
}

func (p Policy) wait() time.Duration {
	if p.Wait <= 0 {
		return DefaultWait
	}
	return p.Wait
}

func (p Policy) reportAfter() time.Duration {
	if p.Report <= 0 {
		return DefaultReport
	}
	return p.Report
}

// blobRetry is the blob store's policy base under the push's bound: each
// attempt bounded by a third of Wait, unless base bounds it more.
func (p Policy) blobRetry(base ledger.RetryPolicy) ledger.RetryPolicy {
	if t := p.wait() / 3; base.AttemptTimeout <= 0 || base.AttemptTimeout > t {
		base.AttemptTimeout = t
	}
	return base
}

func (p Policy) settles() int {
	if p.Settles <= 0 {
		return 3
	}
	return p.Settles
}

func (p Policy) conflicts() int {
	if p.Conflicts <= 0 {
		return 20
	}
	return p.Conflicts
}

// backoff is the pause after the n-th conflict: n × 1–7 ms, the factor taken
// from the clock's nanoseconds.
func (p Policy) backoff(n int, now time.Time) time.Duration {
	return time.Duration(n*(1+int(now.UnixNano()%7))) * time.Millisecond
}

// PushBlobs is b under the bound Config.Policy gives a push's requests to
// the blob store (each attempt a third of Policy.Wait, for a put with none
// of its content taken): for work beside a push that stores its content
// ahead of it (swamp's hints), never waiting longer than the push would.
func (h *Host) PushBlobs(b *ledger.Bucket) *ledger.Bucket {
	return b.WithRetry(h.cfg.Policy.blobRetry(b.Retry()))
}

// failure is how the push's policy takes the error that stopped a plan or a
// publish (classify): what the push does next follows from it (advance).
type failure int

const (
	failNone failure = iota
	// failChain: a chain conflict (*ledger.ConflictError): another host
	// extended a partition the commit touches. The push catches up and
	// publishes again, up to Conflicts times.
	failChain
	// failPaths: paths changed here and by another host (*ConflictError):
	// settled (CommitOptions.Settle, up to Settles times) or returned, the
	// files kept.
	failPaths
	// failLockLost: another holder took a lock the commit carried a fence of
	// (ledger.ErrLockLost): returned at once, never retried — the lock stays
	// taken; what was written under it is the caller's to move.
	failLockLost
	// failRefused: the server or the blob store refused the request, and
	// would again (ledger.ErrPermission, ErrInvalid, ErrTooLarge,
	// ErrServerFull, ErrNotFound, ErrNoBucket, ErrUnknownVersion,
	// ErrLineage, ErrChecksum): returned at once.
	failRefused
	// failUnreachable: no answer (ledger.ErrUnreachable, a *WaitError;
	// ErrOutcomeUnknown: the append's answer did not come, it may be
	// stored): what the stores retry below the push, the watch bounds at
	// Wait; returned.
	failUnreachable
	// failOther: anything else (this host's disk or state, a local change
	// a catch-up would overwrite): returned.
	failOther
)

var failureNames = [...]string{"none", "chain conflict", "path conflict", "lock lost", "refused", "unreachable", "other"}

func (f failure) String() string { return failureNames[f] }

// refusals are the definite answers of the server or the blob store.
var refusals = []error{ledger.ErrPermission, ledger.ErrInvalid, ledger.ErrTooLarge, ledger.ErrServerFull,
	ledger.ErrNotFound, ledger.ErrNoBucket, ledger.ErrUnknownVersion, ledger.ErrLineage, ledger.ErrChecksum}

// classify says which failure err is (failNone for nil). A lost lock is
// told first: whatever else its error wraps, the lock stays taken.
func (Policy) classify(err error) failure {
	var (
		chain *ledger.ConflictError
		paths *ConflictError
	)
	switch {
	case err == nil:
		return failNone
	case errors.Is(err, ledger.ErrLockLost):
		return failLockLost
	case errors.As(err, &paths):
		return failPaths
	case errors.As(err, &chain):
		return failChain
	case errors.Is(err, ledger.ErrUnreachable), errors.Is(err, ledger.ErrOutcomeUnknown):
		return failUnreachable
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return failRefused
		}
	}
	return failOther
}

package snapshot

import (
	"context"
	"errors"
	"fmt"

	"github.com/syncledger/syncledger/ledger"
)

// The retention bound (ledger.Attestations.Retained) tells readers from which
// seq the log holds every event (Floor). A bound too high makes snapshots
// unusable that are not, and with no snapshot at or above it, no snapshot can
// be taken and no host rebuilt; a bound too low sends readers to seqs the log
// no longer holds. So a bound is taken from the object store (Adopt) or from
// the admin (SetRetention) only after it is checked against the log itself.

// ErrBadBound: a retention bound the log contradicts (CheckRetention).
var ErrBadBound = errors.New("retention bound contradicted by the log")

// CheckRetention checks before as the log's retention bound against the log:
// it is at most the head + 1 (Retain's highest: a snapshot at the head, no
// margin), and the log holds every event from it (from its first seq, if that
// is higher) to the head, so that no reader it lets through is sent to a seq
// the log lacks. It reads those events: its cost is in proportion to them. A
// bound the log contradicts is an error wrapping ErrBadBound (and
// ledger.ErrInvalid) that names the seq to go above.
//
// The head is the origin's own (ledger.HeadRequest.Origin): a log read
// through a mirror that lags would refuse a bound the origin holds events up
// to.
func CheckRetention(ctx context.Context, log ledger.CommitLog, before ledger.Seq) error {
	hd, err := log.Head(ctx, ledger.HeadRequest{Origin: true})
	if err != nil {
		return fmt.Errorf("check retention bound %d: read the log's head: %w", before, err)
	}
	if before > hd.Seq+1 {
		return fmt.Errorf("retention bound %d is above the log's head %d (+1): the log cannot have dropped events it never held: %w (%w)",
			before, hd.Seq, ErrBadBound, ledger.ErrInvalid)
	}
	b, err := log.Bounds(ctx)
	if err != nil {
		return fmt.Errorf("check retention bound %d: read log bounds: %w", before, err)
	}
	missing, err := firstMissing(ctx, log, max(before, b.First, 1), hd.Seq)
	if err != nil {
		return fmt.Errorf("check retention bound %d: %w", before, err)
	}
	if missing > 0 {
		return fmt.Errorf("retention bound %d: the log no longer holds seq %d, which the bound says it does (a bound must be above %d): %w (%w)",
			before, missing, missing, ErrBadBound, ledger.ErrInvalid)
	}
	return nil
}

// firstMissing returns the first seq in [from, to] the log no longer holds
// (dropped, or below its first seq), or 0 if it holds them all. A message that
// is there but does not decode is held.
func firstMissing(ctx context.Context, log ledger.CommitLog, from, to ledger.Seq) (ledger.Seq, error) {
	for from <= to {
		err := log.Read(ctx, from, to, func(ledger.Record) error { return nil })
		var te *ledger.TruncatedError
		var re *ledger.RecordError
		switch {
		case err == nil:
			return 0, nil
		case errors.As(err, &te):
			return max(te.From, from), nil
		case errors.As(err, &re) && re.Seq >= from:
			from = re.Seq + 1
		default:
			return 0, fmt.Errorf("read the log from seq %d: %w", from, err)
		}
	}
	return 0, nil
}

// RetentionResult says what SetRetention changed.
type RetentionResult struct {
	Was ledger.Seq `json:"was"` // the bound the log attested before
	Now ledger.Seq `json:"now"` // the bound it attests now (0: none)
}

// SetRetention sets the retention bound the log attests to before, lower or
// higher, once CheckRetention accepts it: the admin's correction of a wrong
// bound (only the admin may: ledger.ErrPermission otherwise). 0 removes it:
// readers then take the log's first seq.
func SetRetention(ctx context.Context, log ledger.CommitLog, before ledger.Seq) (RetentionResult, error) {
	a, err := attested(ctx, log)
	if err != nil {
		return RetentionResult{}, fmt.Errorf("set retention bound: %w", err)
	}
	res := RetentionResult{Was: a.Retained, Now: before}
	if err := CheckRetention(ctx, log, before); err != nil {
		return res, fmt.Errorf("set retention bound: %w", err)
	}
	if err := log.SetRetention(ctx, before); err != nil {
		return res, fmt.Errorf("set retention bound: %w", err)
	}
	return res, nil
}

// WrongBoundError: the log attests a retention bound while it still holds
// every event below it, from seq 1 — a bound no retention run left (an older
// release's adopt of a planted one did), which leaves no snapshot usable or
// takeable. Removing it (SetRetention 0) is the way out. It wraps the
// *ledger.TruncatedError the bound made of the read.
type WrongBoundError struct {
	Bound ledger.Seq // the bound the log attests
	Err   *ledger.TruncatedError
}

func (e *WrongBoundError) Error() string {
	return fmt.Sprintf("the log attests retention bound %d, yet still holds every event below it: %v", e.Bound, e.Err)
}

func (e *WrongBoundError) Unwrap() error { return e.Err }

// WrongBound returns the retention bound the log attests if the log
// contradicts it so that SetRetention(0) is right: it holds every event from
// seq 1 up to it (0: no such bound). It reads those events.
func WrongBound(ctx context.Context, log ledger.CommitLog) (ledger.Seq, error) {
	a, err := attested(ctx, log)
	if err != nil {
		return 0, err
	}
	b, err := log.Bounds(ctx)
	if err != nil {
		return 0, fmt.Errorf("read log bounds: %w", err)
	}
	if a.Retained <= 1 || b.First > 1 || a.Retained > b.Last+1 {
		return 0, nil // none, the log lacks its first events, or ignored already (Floor)
	}
	missing, err := firstMissing(ctx, log, 1, a.Retained-1)
	if err != nil || missing > 0 {
		return 0, err
	}
	return a.Retained, nil
}

package projector

import (
	"errors"
	"fmt"

	"github.com/syncledger/syncledger/ledger"
)

// Sentinel errors of the core. Errors for a malformed record wrap ledger.ErrInvalid
// (or ledger.ErrUnknownVersion), errors for a foreign log wrap ledger.ErrLineage.
var (
	// ErrGap: an event does not extend its partition's chain from the host's mark
	// because events in between have not been read. See GapError: it says where to
	// read from. Reading more fixes it.
	ErrGap = errors.New("gap in partition chain")
	// ErrDiverged: an event contradicts the host's state (a different event where
	// the state says its mark is, or an unapplied event at or below the HWM). The
	// log holds another history than the one the state was built from; reading more
	// does not fix it, the state must be rebuilt (from a snapshot).
	ErrDiverged = errors.New("log diverges from local state")
	// ErrReadyOutstanding: a Ready is outstanding (Advance or Discard it
	// first); for CommitEvents and Restore also: staged work has not been
	// advanced yet. It is about this process's use of its Core, never another
	// process (statedb.ErrLocked is that).
	ErrReadyOutstanding = errors.New("a Ready is outstanding")
	// ErrClash: a commit would make a path a file and a directory at once (see
	// ClashError). Nothing was published.
	ErrClash = errors.New("a file and a directory of the same name")
)

// GapError reports rule 3 (docs/design.md §4): the offered event of Partition is not the
// successor of the host's Mark. The missing events are the partition's records
// with From ≤ seq ≤ To; read them by subject (ReadPartition from From) and offer
// them before the event again. If the log no longer holds them (ErrTruncated) the
// host needs a snapshot. errors.Is(err, ErrGap) holds.
type GapError struct {
	Partition string
	Mark      Mark       // the host's mark of the partition
	Seq       ledger.Seq // the offered event's seq
	ModelSeq  uint64     // the offered event's modelSeq
	From      ledger.Seq // first seq to read: Mark.Seq+1
	To        ledger.Seq // last missing seq: the offered event's Prev
}

func (e *GapError) Error() string {
	return fmt.Sprintf("partition %q: event at seq %d is modelSeq %d but mark is modelSeq %d at seq %d: read seqs %d..%d of the partition: %v",
		e.Partition, e.Seq, e.ModelSeq, e.Mark.ModelSeq, e.Mark.Seq, e.From, e.To, ErrGap)
}

func (e *GapError) Unwrap() error { return ErrGap }

// PartsError reports a record whose Part/Parts do not fit its neighbours (a
// commit's parts sit at consecutive seqs, one atomic batch). Culprit is the
// seq whose event breaks the rule: the one before this record when it claims
// parts that never came (this record starts a commit), else this one — the
// seq to quarantine (ledger.Quarantine) if it is bad. errors.Is(err,
// ledger.ErrInvalid) holds.
type PartsError struct {
	Seq     ledger.Seq // the record offered
	Culprit ledger.Seq
	Err     error
}

func (e *PartsError) Error() string { return e.Err.Error() }
func (e *PartsError) Unwrap() error { return e.Err }

// ErrAppliedQuarantined: a skipped record (ledger.Skip) of a message this host
// applied before an admin quarantined it (its partition's mark is at its
// seq: a part of a commit whose parts lie, applied before the lie showed).
// The host holds what no other reader does: rebuild its cache.
var ErrAppliedQuarantined = errors.New("applied here before it was quarantined: rebuild this cache")

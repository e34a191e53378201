package host

import (
	"fmt"

	"github.com/syncledger/syncledger/ledger"
)

// The host's errors carry what a caller needs to say what to do next (the
// paths, the seqs, what was skipped); they name no command line: the CLI
// turns them into its commands (cmd/syncledger/wayout.go).

// ErrNoChange: a resolve named a path that holds no uncommitted change (so no
// conflict to settle). It wraps ledger.ErrNotFound.
var ErrNoChange = fmt.Errorf("no uncommitted change there: %w", ledger.ErrNotFound)

// NoSnapshotError: a rebuild found no usable snapshot while the log no longer
// holds its first events. Skipped lists the snapshots it passed over (not
// attested, or not readable), Unattested those of them not attested. On a
// ledger that never attested a snapshot (Attests false: a release before
// attestations made it), those are what that release took, usable once an
// admin adopts them; on a ledger that attests, an unattested snapshot was not
// taken by the admin's snapshot command (whoever may write blobs may write
// one), and nothing makes it usable. It wraps the log's
// *ledger.TruncatedError.
type NoSnapshotError struct {
	Skipped    []string
	Unattested []string
	Attests    bool
	// WrongBound, when set, is the retention bound the log attests while it
	// still holds every event below it (snapshot.WrongBound): an admin removes
	// it, and the rebuild replays the log from seq 1.
	WrongBound ledger.Seq
	Err        *ledger.TruncatedError
}

func (e *NoSnapshotError) Error() string {
	switch {
	case e.WrongBound > 0:
		return fmt.Sprintf("no usable snapshot, and the log attests retention bound %d while it still holds every event below it: %v", e.WrongBound, e.Err)
	case len(e.Skipped) == 0:
		return fmt.Sprintf("no usable snapshot: %v", e.Err)
	case e.Attests:
		return fmt.Sprintf("no usable snapshot (%d skipped: not readable, or not attested by the ledger, which attests every snapshot its admin takes: never used): %v", len(e.Skipped), e.Err)
	}
	return fmt.Sprintf("no usable snapshot (%d skipped: not attested, or not readable; an admin adopts those an older release took): %v", len(e.Skipped), e.Err)
}

func (e *NoSnapshotError) Unwrap() error { return e.Err }

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
// attested, or not readable), Unattested those of them not attested: the ones
// an older release took, usable once an admin adopts them (if they read
// back). It wraps the log's *ledger.TruncatedError.
type NoSnapshotError struct {
	Skipped    []string
	Unattested []string
	Err        *ledger.TruncatedError
}

func (e *NoSnapshotError) Error() string {
	if len(e.Skipped) == 0 {
		return fmt.Sprintf("no usable snapshot: %v", e.Err)
	}
	return fmt.Sprintf("no usable snapshot (%d skipped: not attested, or not readable; an admin adopts those an older release took): %v", len(e.Skipped), e.Err)
}

func (e *NoSnapshotError) Unwrap() error { return e.Err }

package ledger

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is; every error a package of this
// module returns for one of these conditions wraps the matching sentinel.
var (
	// ErrInvalid: an input (path, event, name, digest, config) is malformed.
	ErrInvalid = errors.New("invalid")
	// ErrUnknownVersion: an event or snapshot has a format version this code does not read.
	ErrUnknownVersion = errors.New("unknown format version")
	// ErrNotFound: the object, blob, ledger or partition does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNoLedger: the ledger asked for does not exist (it was never created,
	// or its name is wrong). It wraps ErrNotFound.
	ErrNoLedger = fmt.Errorf("no such ledger: %w", ErrNotFound)
	// ErrChecksum: content read or written does not match its SHA-256.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrConflict: an append did not extend a partition's chain (another host extended
	// it first). The append stored nothing. See ConflictError.
	ErrConflict = errors.New("chain conflict")
	// ErrLockLost: an append made under a lock (a Fence) found that another
	// holder took the lock since. The append stored nothing, and is not to be
	// retried: its holder no longer holds the lock. See LockLostError.
	ErrLockLost = errors.New("lock lost")
	// ErrTruncated: the log no longer holds the asked-for events (its first seq moved
	// past them); the reader needs a snapshot.
	ErrTruncated = errors.New("events no longer in the log")
	// ErrLineage: the log belongs to another ledger (UUID) than the reader's state.
	ErrLineage = errors.New("ledger lineage mismatch")
	// ErrTooLarge: an input exceeds a hard limit (message size, batch size, path length).
	ErrTooLarge = errors.New("too large")
	// ErrPermission: the server refused the operation for lack of permission
	// (for example a read-only tooling user publishing a commit).
	ErrPermission = errors.New("permission denied")
	// ErrNoBucket: the bucket (or directory, or stream) an object store lives
	// in does not exist: a store configured wrong, never an absent object, so
	// it does not wrap ErrNotFound.
	ErrNoBucket = errors.New("no such bucket")
	// ErrRewound: the log ends below a seq this reader already read or applied
	// (its last seq, or a partition's, is below the reader's HWM or mark): the
	// server lost events, having been restored from an older backup or replaced
	// under the same lineage. Nothing is "up to date" about that; the reader
	// must not go on as if the lost events had never existed.
	ErrRewound = errors.New("log ends below what was already read")
	// ErrLagging: the replica that answered does not have events the log's
	// leader holds; it catches up on its own, so retrying later helps.
	ErrLagging = errors.New("replica behind the log")
	// ErrOutcomeUnknown is wrapped by CommitLog.Append errors after which the
	// commit may or may not be stored (the caller's context ended, or every
	// attempt ended without a definite answer). Append the same events again to
	// find out: it stores nothing twice and returns the stored seqs.
	ErrOutcomeUnknown = errors.New("commit outcome unknown")
	// ErrUnreachable: the server could not be reached — no connection could be
	// made, or the connection was down while the operation waited for its
	// answer. Trying again once the server is back helps; a write that fails so
	// may still have been stored (an Append says so with ErrOutcomeUnknown too).
	ErrUnreachable = errors.New("server unreachable")
)

// ConflictError is returned (wrapped) when an append finds that a partition's chain
// has moved: Expected is the Prev the append carried, Actual the partition's last seq
// in the log. errors.Is(err, ErrConflict) holds.
type ConflictError struct {
	Partition string
	Expected  Seq
	Actual    Seq
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("partition %q: expected last seq %d, log has %d: %v", e.Partition, e.Expected, e.Actual, ErrConflict)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// TruncatedError is returned (wrapped) when a read starts below the log's first seq.
// errors.Is(err, ErrTruncated) holds.
type TruncatedError struct {
	From  Seq // first seq asked for
	First Seq // the log's first seq
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("seqs %d..%d: %v (first seq is %d; rebuild from a snapshot)", e.From, e.First-1, ErrTruncated, e.First)
}

func (e *TruncatedError) Unwrap() error { return ErrTruncated }

// ErrClosed is what a closed Subscription's Next returns, and every operation
// of a closed Bucket.
var ErrClosed = errors.New("closed")

// PermissionError is returned (wrapped) when the server refused an operation
// for lack of permission: this user may not Verb ("publish" or "subscribe")
// to Subject, the server's name of what was refused (a JetStream API request,
// an event's or a bucket key's subject). errors.Is(err, ErrPermission) holds.
// An adapter builds it from the server's report, in one place; callers read
// its fields, never the server's text.
type PermissionError struct {
	Verb    string // "publish" or "subscribe"
	Subject string // what was refused; empty when the server did not say
	Err     error  // the server's report, for logs
}

func (e *PermissionError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("%v: the server refused an operation of this user: %v", ErrPermission, e.Err)
	}
	return fmt.Sprintf("%v: the server refused this user's %s to %q", ErrPermission, e.Verb, e.Subject)
}

func (e *PermissionError) Unwrap() error { return ErrPermission }

// ConfigError is returned (wrapped) when a resource a process opens on the
// server (a ledger's stream, a bucket) is not configured as syncledger
// creates it: its Setting is Found, not Want. Repair says which admin command
// makes it so. errors.Is(err, ErrInvalid) holds. Nothing of such a resource
// is trusted: the process stops before using it.
type ConfigError struct {
	Resource string // what it is, with the server's name of it
	Setting  string // the server's name of the setting
	Found    string
	Want     string
	Repair   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: %s is %s, want %s (%s): %v", e.Resource, e.Setting, e.Found, e.Want, e.Repair, ErrInvalid)
}

func (e *ConfigError) Unwrap() error { return ErrInvalid }

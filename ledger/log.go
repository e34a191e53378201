package ledger

import (
	"context"
	"fmt"
)

// MaxBatch is the most events (partitions) one commit may have: JetStream's atomic
// batch limit. A commit touching more partitions is refused with ErrTooLarge;
// host.Commit publishes a wider change as several commits, each atomic.
const MaxBatch = 1000

// Info describes a ledger as its log stores it.
type Info struct {
	Name     string // ledger name, [A-Za-z0-9_-]{1,64}
	UUID     string // lineage, fixed at creation
	Format   int    // log format (LogFormat); events are FormatVersion
	Blobs    string // blob store URL (file:///…, s3://…, gs://…, nats://…)
	Replicas int

	// NamespaceOf and Namespace mark a ledger made as namespace Namespace of
	// the ledger whose UUID is NamespaceOf (a swamp datastore's namespace:
	// swamp.NamespaceLedger), set at its creation; both empty on any other
	// ledger, and on a namespace's ledger made by a release before the mark.
	NamespaceOf string
	Namespace   string
}

// Bounds are the log's first and last seqs. An empty log has First = Last+1
// (JetStream's convention), e.g. {1, 0}.
type Bounds struct {
	First Seq
	Last  Seq
}

// CommitLog is the ordered, chained event log of one ledger.
//
// Every method takes a context first; it blocks at most until the context is done.
// Implementations never log and never panic.
type CommitLog interface {
	// Info returns the ledger's settings.
	Info(ctx context.Context) (Info, error)

	// LastSeq returns the log's last seq: the cheapest request the log offers,
	// used by the sync fast path. An answer may be as old as the log's opening
	// (natsjs.Log answers its first call from it); a caller that knows of a
	// later seq asks again.
	LastSeq(ctx context.Context) (Seq, error)

	// Bounds returns the first and last seq.
	Bounds(ctx context.Context) (Bounds, error)

	// Head returns where the log ends and who says so (see Head): the
	// source it reads from, or the origin itself when req.Origin is set,
	// with the stamp of the message there in the same request (Head.Stamp).
	// A log read from a mirror never reads below what it learned the
	// origin holds: its own appends, and the heads the origin gave it.
	Head(ctx context.Context, req HeadRequest) (Head, error)

	// PartitionLastSeq returns the seq of the partition's last event, 0 if the
	// partition has none (or of a quarantined message after it: see
	// Quarantine; reading from there finds no event).
	PartitionLastSeq(ctx context.Context, partition string) (Seq, error)

	// PartitionTip is PartitionLastSeq with the commit id of the message
	// there (CommitAt's answer for that seq), in the same request: what a
	// scoped sync compares with the commit at its mark.
	PartitionTip(ctx context.Context, partition string) (Seq, string, error)

	// PartitionHead returns the partition's last event; ErrNotFound if it has none.
	PartitionHead(ctx context.Context, partition string) (Record, error)

	// CommitAt returns the id of the commit whose event the log stores at seq,
	// quarantined or not: what a host compares with the commit it applied there
	// to tell the history it applied from another one under the same seqs (a
	// server restored from an older backup, then written to). "" when the
	// message at seq is not an event of this ledger (a quarantine notice, a
	// message that does not decode); ErrNotFound when the log holds no message
	// at seq (past its last, or dropped). One request, the cheapest read of a
	// message the log offers.
	CommitAt(ctx context.Context, seq Seq) (string, error)

	// Append publishes one commit's events (Part 1..Parts, in order) atomically and
	// returns their seqs. Each event must extend its partition's chain (its Prev is
	// the partition's current last seq); otherwise nothing is stored and the error
	// is a *ConflictError. A retry after an ambiguous failure (lost ack, timeout)
	// stores nothing twice and returns the seqs of the stored events.
	//
	// Each fence (a lock the commit is made under: see Fence) adds a fence
	// check to the same atomic batch, after the events, at the seqs following
	// the last event's (FenceCheckSeqs). The batch is stored only while every
	// fence is its lock's last fence record; otherwise nothing is stored and
	// the error is a *LockLostError — also when a chain moved too: a commit
	// under a lost lock is never retried, so ErrLockLost is told first. A
	// commit stored before the lock was taken from it is stored: a retry
	// after an ambiguous failure returns its seqs. A log of a format before
	// FenceFormat refuses fences (ErrNoFences).
	Append(ctx context.Context, events []Event, fences ...Fence) ([]Seq, error)

	// TakeFence stores rec, the fence record of a lock its holder has just
	// taken, on the lock's fence subject (FenceSubject), and returns its seq:
	// the holder's Fence of rec.Lock. From then on an Append carrying an
	// earlier fence of the lock fails with a *LockLostError. A retry after an
	// ambiguous failure stores rec once (its ID is its message id). A log of a
	// format before FenceFormat refuses it (ErrNoFences).
	TakeFence(ctx context.Context, rec FenceRecord) (Seq, error)

	// Read calls fn for every record with from ≤ seq ≤ to, in seq order. to = 0 means
	// the log's last seq when Read starts. If from is below the log's first seq the
	// result is a *TruncatedError and fn is not called. A record that does not decode
	// stops the read with a *RecordError wrapping ErrInvalid or ErrUnknownVersion
	// (or ErrLineage). A quarantined message, and a quarantine notice, are
	// records with Skip set (see Quarantine). fn returning an error stops the read with that error.
	Read(ctx context.Context, from, to Seq, fn func(Record) error) error

	// ReadPartition calls fn for the partition's records with seq ≥ from, up to the
	// log's last seq when it starts, in seq order, using the per-subject index (cost
	// proportional to the partition's records read, not the log's size). Truncation
	// and decoding are handled as in Read. Quarantined messages on the
	// partition's subject are part of no chain, and not handed out.
	ReadPartition(ctx context.Context, partition string, from Seq, fn func(Record) error) error

	// Follow calls fn for every record from seq from on, in order, waiting for new
	// ones, until ctx is done (returning ctx.Err()) or fn returns an error.
	// Truncation and decoding are handled as in Read. A follower holds no
	// state on the log's server (no consumer: any number of followers cost it
	// nothing each, and a killed one leaves nothing), and whatever the log
	// tells followers of new records is best effort: a follower that missed
	// it delivers every record all the same (drivertest's
	// FollowHoldsNoServerState, FollowSurvivesMissedNotices).
	Follow(ctx context.Context, from Seq, fn func(Record) error) error

	// Quarantines returns every quarantine notice stored up to the log's last
	// seq, by quarantined seq (an empty map if none). Readers that take messages
	// from elsewhere (consumers) use it to skip what Read would.
	Quarantines(ctx context.Context) (map[Seq]Quarantine, error)

	// Quarantine stores a notice that the message at q.Seq is not an event any
	// reader applies, and returns the notice's seq (see Quarantine, the type). It
	// refuses (ErrInvalid) a seq the log does not hold, a quarantine notice, and a
	// well-formed event unless force; (ErrConflict) a seq already quarantined.
	// Only the admin role may quarantine; others get ErrPermission.
	Quarantine(ctx context.Context, q Quarantine, force bool) (Seq, error)

	// TruncateBefore drops the events with seq < before, except the last event of
	// each partition: it is kept so the partition's chain can still be extended
	// (the log's compare-and-append checks a new event's Prev against it; an
	// emptied partition would accept a chain restarting at Prev 0). Afterwards a
	// read from a seq below before fails with an error wrapping ErrTruncated. It
	// returns how many events were dropped. It is idempotent. Only snapshots make
	// dropping safe (docs/design.md §6): the caller decides the bound from the
	// newest complete snapshot, never from the log alone.
	TruncateBefore(ctx context.Context, before Seq) (dropped uint64, err error)

	// Attested, AttestSnapshot and AttestRetention keep the admin's word on the
	// objects beside the blobs (see Attestations): only the admin role may
	// attest; others get ErrPermission. AttestRetention only ever raises the
	// bound (two retention runs may finish in either order); SetRetention
	// sets it to before, lower or higher: the admin's correction of a wrong
	// bound, which the caller checks against the log first
	// (projector/snapshot.CheckRetention).
	Attested(ctx context.Context) (Attestations, error)
	AttestSnapshot(ctx context.Context, seq Seq, sum Digest) error
	AttestRetention(ctx context.Context, before Seq) error
	SetRetention(ctx context.Context, before Seq) error
}

// CheckAppend checks that events and fences form one commit a CommitLog of
// lineage uuid may append: 1..MaxBatch events of one commit id, parts 1..k in
// order, each of this lineage, no partition twice; fences of valid locks at
// seqs above 0, no lock twice, and at most MaxBatch messages in all. Log
// checks every Append this way, once, before its driver is called
// (NewAppendBatch).
func CheckAppend(uuid string, events []Event, fences ...Fence) error {
	k := len(events)
	if k == 0 {
		return fmt.Errorf("append: no events: %w", ErrInvalid)
	}
	id := events[0].Commit
	if k > MaxBatch {
		return fmt.Errorf("append commit %s: it touches %d partitions, more than the %d one atomic batch may hold (split the commit): %w", id, k, MaxBatch, ErrTooLarge)
	}
	if err := checkFences(id, k, fences); err != nil {
		return err
	}
	seen := make(map[string]int, k)
	for i, e := range events {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("append commit %s part %d: "+format+": %w", append([]any{id, i + 1}, append(args, ErrInvalid)...)...)
		}
		switch {
		case e.Commit != id:
			return bad("commit id %q differs from part 1's", e.Commit)
		case e.Parts != k:
			return bad("parts %d, but the commit has %d events", e.Parts, k)
		case e.Part != i+1:
			return bad("part %d out of order", e.Part)
		case e.Ledger != uuid:
			return fmt.Errorf("append commit %s part %d: event of ledger %s, log of ledger %s: %w", id, i+1, e.Ledger, uuid, ErrLineage)
		}
		if j, dup := seen[e.Partition]; dup {
			return bad("partition %q already in part %d", e.Partition, j+1)
		}
		seen[e.Partition] = i
	}
	return nil
}

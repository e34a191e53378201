package ledger

import "context"

// MaxBatch is the most events (partitions) one commit may have: JetStream's atomic
// batch limit. A commit touching more partitions is refused with ErrTooLarge;
// host.Commit publishes a wider change as several commits, each atomic.
const MaxBatch = 1000

// Info describes a ledger as its log stores it.
type Info struct {
	Name     string // ledger name, [A-Za-z0-9_-]{1,64}
	UUID     string // lineage, fixed at creation
	Format   int    // event format version
	Blobs    string // blob store URL (file:///…, s3://…, gs://…, nats://…)
	Replicas int
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
	// (jetstream.Log answers its first call from it); a caller that knows of a
	// later seq asks again.
	LastSeq(ctx context.Context) (Seq, error)

	// Bounds returns the first and last seq.
	Bounds(ctx context.Context) (Bounds, error)

	// PartitionLastSeq returns the seq of the partition's last event, 0 if the
	// partition has none (or of a quarantined message after it: see
	// Quarantine; reading from there finds no event).
	PartitionLastSeq(ctx context.Context, partition string) (Seq, error)

	// PartitionHead returns the partition's last event; ErrNotFound if it has none.
	PartitionHead(ctx context.Context, partition string) (Record, error)

	// Append publishes one commit's events (Part 1..Parts, in order) atomically and
	// returns their seqs. Each event must extend its partition's chain (its Prev is
	// the partition's current last seq); otherwise nothing is stored and the error
	// is a *ConflictError. A retry after an ambiguous failure (lost ack, timeout)
	// stores nothing twice and returns the seqs of the stored events.
	Append(ctx context.Context, events []Event) ([]Seq, error)

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
}

package ledger

import "context"

// LogDriver is one backend's commit log under Log, the portable type every
// CommitLog handed out is (natsjs's JetStream driver, memledger's): what one
// backend must do, and nothing that every backend must do the same way. Its
// methods are CommitLog's, with these promises from Log:
//
//   - the context is not yet done when a method is called (a driver still
//     honours its end while it works);
//   - Append's batch passed CheckAppend for this log's lineage, its events
//     and fence checks encoded on their subjects (AppendBatch), and it has
//     fences only when the log is Fenced;
//   - TakeFence's record is of this log's lineage, encoded (data), and the
//     log is Fenced;
//   - Quarantine's notice is of this log's lineage and format version, with
//     no partition, model seq or prev (the driver reads them from the
//     message it quarantines: WithLink), and it encodes;
//   - from (Read, ReadPartition, Follow) is at least 1; TruncateBefore's
//     bound is above 1; AttestSnapshot's seq is above 0 and its digest not
//     zero.
//
// A driver does none of those checks again. Capabilities are methods every
// driver implements, never optional interfaces. The conformance suite every
// driver passes, through the Log over it, is ledger/drivertest's
// TestCommitLog.
type LogDriver interface {
	// Info returns the ledger's settings as the driver read them when it
	// was opened: no request.
	Info() Info

	LastSeq(ctx context.Context) (Seq, error)
	Bounds(ctx context.Context) (Bounds, error)
	Head(ctx context.Context, req HeadRequest) (Head, error)
	PartitionLastSeq(ctx context.Context, partition string) (Seq, error)
	PartitionTip(ctx context.Context, partition string) (Seq, string, error)
	PartitionHead(ctx context.Context, partition string) (Record, error)
	CommitAt(ctx context.Context, seq Seq) (string, error)

	// Append stores b atomically, as CommitLog.Append says.
	Append(ctx context.Context, b *AppendBatch) ([]Seq, error)
	// TakeFence stores rec, encoded as data, on its lock's fence subject
	// under the message id FenceRecordID(rec), as CommitLog.TakeFence says.
	TakeFence(ctx context.Context, rec FenceRecord, data []byte) (Seq, error)

	Read(ctx context.Context, from, to Seq, fn func(Record) error) error
	ReadPartition(ctx context.Context, partition string, from Seq, fn func(Record) error) error
	Follow(ctx context.Context, from Seq, fn func(Record) error) error

	Quarantines(ctx context.Context) (map[Seq]Quarantine, error)
	Quarantine(ctx context.Context, q Quarantine, force bool) (Seq, error)
	TruncateBefore(ctx context.Context, before Seq) (dropped uint64, err error)

	Attested(ctx context.Context) (Attestations, error)
	AttestSnapshot(ctx context.Context, seq Seq, sum Digest) error
	AttestRetention(ctx context.Context, before Seq) error
	SetRetention(ctx context.Context, before Seq) error
}

// AppendBatch is one commit's messages as Log hands them to its driver's
// Append, checked (CheckAppend) and encoded: the commit's events, in part
// order, then one fence check per fence (FenceChecks), in the fences' order.
// Message i is Data[i] on Subjects[i]: event i's on its partition's subject
// (Subject), fence check j's (i = len(Events)+j) on FenceCheckSubject.
type AppendBatch struct {
	Commit   string // the commit id
	Events   []Event
	Fences   []Fence
	Subjects []string
	Data     [][]byte
}

package ledger

import (
	"context"
	"fmt"
	"time"
)

// Log is the one portable CommitLog, over one backend's LogDriver (ledger/
// natsjs's JetStream driver, ledger/memledger's), after go-cloud's blob: what
// every backend must do it does once, before the driver is called —
//
//   - the context: a done one is refused (its error wrapped, as
//     "ledger <name> <operation>: …"; Follow returns it as it is);
//   - Append: CheckAppend against the log's lineage, ErrNoFences on a log
//     before FenceFormat, and the events and fence checks encoded on their
//     subjects (AppendBatch): a commit that does not encode is refused whole;
//   - TakeFence: the record's lineage (ErrLineage), ErrNoFences, its encoding;
//   - Quarantine: the notice made the log's (its version and lineage set,
//     its chain link cleared for the driver to read) and checked;
//   - the bounds: a read from below seq 1 reads from 1, a truncation below
//     seq 2 drops nothing, an attestation of seq 0 or a zero digest is
//     ErrInvalid.
//
// Callers hold it as a CommitLog (decorators wrap the interface); natsjs.Log
// and memledger.Log embed it beside their backend's own operations. A Log is
// safe for concurrent use if its driver is.
type Log struct {
	d LogDriver
}

var _ CommitLog = (*Log)(nil)

// NewLog returns the portable CommitLog over d.
func NewLog(d LogDriver) *Log { return &Log{d: d} }

// live is every operation's preamble: the context not yet done. (One whose
// name is formatted checks ctx itself, formatting only when it fails: the
// hot paths allocate nothing for it.)
func (l *Log) live(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return l.fail(op, err)
	}
	return nil
}

func (l *Log) fail(op string, err error) error {
	return fmt.Errorf("ledger %q %s: %w", l.d.Info().Name, op, err)
}

// Info returns the ledger's settings.
func (l *Log) Info(ctx context.Context) (Info, error) {
	if err := l.live(ctx, "info"); err != nil {
		return Info{}, err
	}
	return l.d.Info(), nil
}

// LastSeq returns the log's last seq; see CommitLog.
func (l *Log) LastSeq(ctx context.Context) (Seq, error) {
	if err := l.live(ctx, "last seq"); err != nil {
		return 0, err
	}
	return l.d.LastSeq(ctx)
}

// Bounds returns the first and last seq.
func (l *Log) Bounds(ctx context.Context) (Bounds, error) {
	if err := l.live(ctx, "bounds"); err != nil {
		return Bounds{}, err
	}
	return l.d.Bounds(ctx)
}

// Head returns where the log ends and who says so; see CommitLog.
func (l *Log) Head(ctx context.Context, req HeadRequest) (Head, error) {
	if err := l.live(ctx, "head"); err != nil {
		return Head{}, err
	}
	return l.d.Head(ctx, req)
}

// PartitionLastSeq returns the seq of the partition's last event; see
// CommitLog.
func (l *Log) PartitionLastSeq(ctx context.Context, partition string) (Seq, error) {
	if err := ctx.Err(); err != nil {
		return 0, l.fail(fmt.Sprintf("partition %q last seq", partition), err)
	}
	return l.d.PartitionLastSeq(ctx, partition)
}

// PartitionTip returns the partition's last seq and the commit there; see
// CommitLog.
func (l *Log) PartitionTip(ctx context.Context, partition string) (Seq, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", l.fail(fmt.Sprintf("partition %q tip", partition), err)
	}
	return l.d.PartitionTip(ctx, partition)
}

// PartitionHead returns the partition's last event; ErrNotFound if none.
func (l *Log) PartitionHead(ctx context.Context, partition string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, l.fail(fmt.Sprintf("partition %q head", partition), err)
	}
	return l.d.PartitionHead(ctx, partition)
}

// CommitAt returns the id of the commit whose event the log stores at seq;
// see CommitLog.
func (l *Log) CommitAt(ctx context.Context, seq Seq) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", l.fail(fmt.Sprintf("commit at seq %d", seq), err)
	}
	return l.d.CommitAt(ctx, seq)
}

// Append checks and encodes one commit (see Log), then has the driver store
// it; see CommitLog.
func (l *Log) Append(ctx context.Context, events []Event, fences ...Fence) ([]Seq, error) {
	info := l.d.Info()
	b, err := NewAppendBatch(info, events, fences)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ledger %q append commit %s: %w", info.Name, b.Commit, err)
	}
	return l.d.Append(ctx, b)
}

// NewAppendBatch checks events and fences as one commit of the ledger info
// describes (CheckAppend, ErrNoFences) and encodes them: what Log hands its
// driver's Append.
func NewAppendBatch(info Info, events []Event, fences []Fence) (*AppendBatch, error) {
	if err := CheckAppend(info.UUID, events, fences...); err != nil {
		return nil, err
	}
	id := events[0].Commit
	if len(fences) > 0 && !info.Fenced() {
		return nil, fmt.Errorf("ledger %q append commit %s: %w", info.Name, id, ErrNoFences)
	}
	k := len(events)
	n := k + len(fences)
	b := &AppendBatch{Commit: id, Events: events, Fences: fences, Subjects: make([]string, n), Data: make([][]byte, n)}
	for i, e := range events {
		data, err := EncodeEvent(e)
		if err != nil {
			return nil, fmt.Errorf("append commit %s part %d: %w", id, i+1, err)
		}
		b.Subjects[i], b.Data[i] = Subject(info.Name, e.Partition), data
	}
	for i, c := range FenceChecks(info.UUID, id, fences) {
		data, err := EncodeFenceCheck(c)
		if err != nil {
			return nil, fmt.Errorf("append commit %s fence %d: %w", id, i+1, err)
		}
		b.Subjects[k+i], b.Data[k+i] = FenceCheckSubject(info.Name), data
	}
	return b, nil
}

// TakeFence checks and encodes rec, then has the driver store it; see
// CommitLog.
func (l *Log) TakeFence(ctx context.Context, rec FenceRecord) (Seq, error) {
	info := l.d.Info()
	fail := func(err error) error {
		return fmt.Errorf("ledger %q take fence of lock %q: %w", info.Name, rec.Lock, err)
	}
	if rec.Ledger != info.UUID {
		return 0, fail(fmt.Errorf("record of ledger %s: %w", rec.Ledger, ErrLineage))
	}
	if !info.Fenced() {
		return 0, fail(ErrNoFences)
	}
	data, err := EncodeFenceRecord(rec)
	if err != nil {
		return 0, fail(err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fail(err)
	}
	return l.d.TakeFence(ctx, rec, data)
}

// Read calls fn for every record with from ≤ seq ≤ to; see CommitLog.
func (l *Log) Read(ctx context.Context, from, to Seq, fn func(Record) error) error {
	if err := l.live(ctx, "read"); err != nil {
		return err
	}
	return l.d.Read(ctx, max(from, 1), to, fn)
}

// ReadPartition calls fn for the partition's records with seq ≥ from; see
// CommitLog.
func (l *Log) ReadPartition(ctx context.Context, partition string, from Seq, fn func(Record) error) error {
	if err := ctx.Err(); err != nil {
		return l.fail(fmt.Sprintf("read partition %q", partition), err)
	}
	return l.d.ReadPartition(ctx, partition, max(from, 1), fn)
}

// Follow calls fn for every record from seq from on, waiting for new ones,
// until ctx is done (returning ctx.Err()) or fn returns an error.
func (l *Log) Follow(ctx context.Context, from Seq, fn func(Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.d.Follow(ctx, max(from, 1), fn)
}

// Quarantines returns every quarantine notice, by quarantined seq.
func (l *Log) Quarantines(ctx context.Context) (map[Seq]Quarantine, error) {
	if err := l.live(ctx, "quarantines"); err != nil {
		return nil, err
	}
	return l.d.Quarantines(ctx)
}

// Quarantine makes q the log's notice and checks it (see Log), then has the
// driver store it; see CommitLog. A zero q.At is the driver's clock's now.
func (l *Log) Quarantine(ctx context.Context, q Quarantine, force bool) (Seq, error) {
	info := l.d.Info()
	op := fmt.Sprintf("quarantine seq %d", q.Seq)
	q.V, q.Ledger = FormatVersion, info.UUID
	q.Partition, q.ModelSeq, q.Prev = "", 0, 0 // the driver reads them from the message
	check := q
	if check.At.IsZero() {
		check.At = time.Unix(1, 0) // the driver's clock will say
	}
	if _, err := EncodeQuarantine(check); err != nil {
		return 0, l.fail(op, err)
	}
	if err := l.live(ctx, op); err != nil {
		return 0, err
	}
	return l.d.Quarantine(ctx, q, force)
}

// TruncateBefore drops the events with seq < before except each partition's
// last; see CommitLog. A bound of 1 or less drops nothing.
func (l *Log) TruncateBefore(ctx context.Context, before Seq) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, l.fail(fmt.Sprintf("truncate before %d", before), err)
	}
	if before <= 1 {
		return 0, nil
	}
	return l.d.TruncateBefore(ctx, before)
}

// Attested returns the admin's attestations; see CommitLog.
func (l *Log) Attested(ctx context.Context) (Attestations, error) {
	if err := l.live(ctx, "read attestations"); err != nil {
		return Attestations{}, err
	}
	return l.d.Attested(ctx)
}

// AttestSnapshot attests the snapshot at seq with digest sum; see CommitLog.
func (l *Log) AttestSnapshot(ctx context.Context, seq Seq, sum Digest) error {
	if seq == 0 || sum.IsZero() {
		return fmt.Errorf("attest snapshot: seq %d, digest %s: %w", seq, sum, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return l.fail(fmt.Sprintf("attest the snapshot at seq %d", seq), err)
	}
	return l.d.AttestSnapshot(ctx, seq, sum)
}

// AttestRetention raises the attested retention bound to before; see
// CommitLog.
func (l *Log) AttestRetention(ctx context.Context, before Seq) error {
	if err := ctx.Err(); err != nil {
		return l.fail(fmt.Sprintf("attest the retention bound %d", before), err)
	}
	return l.d.AttestRetention(ctx, before)
}

// SetRetention sets the attested retention bound to before; see CommitLog.
func (l *Log) SetRetention(ctx context.Context, before Seq) error {
	if err := ctx.Err(); err != nil {
		return l.fail(fmt.Sprintf("set the retention bound to %d", before), err)
	}
	return l.d.SetRetention(ctx, before)
}

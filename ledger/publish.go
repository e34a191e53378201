package ledger

import (
	"bytes"
	"context"
	"fmt"
)

// Publish is the one content-first publish of a commit (package doc,
// "Content first"): it stores in blobs the manifest of each event whose
// entries are too large to inline (Externalize), and only then appends the
// events to log, atomically (CommitLog.Append). Every writer of commits — a
// host's commit, swamp import — publishes through it.
//
// The caller stores first every blob an entry names (Bucket.Put, which is
// durable when it returns, or a batch's Put: PublishBatch flushes the batch)
// and makes durable whatever else the events vouch for (a host fsyncs its
// committed files): nothing in the log may name content that is not durable. A blob stored for a commit that is then not
// published (an error, a crash, a conflict) is garbage that blob GC collects.
//
// Append's errors are returned as they are: a *ConflictError (nothing stored:
// catch up and build the commit again), or an error wrapping
// ErrOutcomeUnknown, after which the commit may be stored; publishing the
// same events again stores nothing twice and returns their seqs.
//
// fences are the locks the commit is made under (CommitLog.Append): a lock
// another holder took since fails it with a *LockLostError, nothing stored.
func Publish(ctx context.Context, log CommitLog, blobs *Bucket, events []Event, fences ...Fence) ([]Seq, error) {
	return PublishBatch(ctx, log, blobs.Batch(), events, fences...)
}

// PublishBatch is Publish whose manifests go into b, the batch the caller
// stored the commit's content in (BlobBatch): b is flushed — the content and
// the manifests made durable together — before the events are appended, so
// nothing in the log names a blob a power cut could lose. b is done with
// after it: a caller publishing several commits from one batch passes it to
// the first and a new one (Bucket.Batch) to each next.
func PublishBatch(ctx context.Context, log CommitLog, b *BlobBatch, events []Event, fences ...Fence) ([]Seq, error) {
	wire := make([]Event, len(events))
	for i, ev := range events {
		w, manifest, err := Externalize(ev)
		if err != nil {
			return nil, fmt.Errorf("publish commit %s: %w", ev.Commit, err)
		}
		if manifest != nil {
			if err := b.Put(ctx, DigestOf(manifest), bytes.NewReader(manifest), int64(len(manifest))); err != nil {
				return nil, fmt.Errorf("publish commit %s: store manifest of %q: %w", ev.Commit, ev.Partition, err)
			}
		}
		wire[i] = w
	}
	if err := b.Flush(ctx); err != nil {
		if len(events) > 0 {
			return nil, fmt.Errorf("publish commit %s: make its content durable: %w", events[0].Commit, err)
		}
		return nil, fmt.Errorf("publish commit: make its content durable: %w", err)
	}
	return log.Append(ctx, wire, fences...)
}

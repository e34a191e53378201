package ledger

import "context"

// Truncater is implemented by a CommitLog that can drop old events (retention).
// Only snapshots make dropping safe (docs/design.md §6): the caller decides the bound from
// the newest complete snapshot, never from the log alone.
type Truncater interface {
	// TruncateBefore drops the events with seq < before, except the last event of
	// each partition: it is kept so the partition's chain can still be extended
	// (the log's compare-and-append checks a new event's Prev against it; an
	// emptied partition would accept a chain restarting at Prev 0). Afterwards a
	// read from a seq below before fails with an error wrapping ErrTruncated. It
	// returns how many events were dropped. It is idempotent.
	TruncateBefore(ctx context.Context, before Seq) (dropped uint64, err error)
}

// ObjectsOf returns the ObjectStore under a BlobStore made by NewBlobStore, so
// keyed objects (snapshots) can live beside the blobs in the same store. It
// reports false for any other BlobStore.
func ObjectsOf(b BlobStore) (ObjectStore, bool) {
	if s, ok := b.(*blobStore); ok {
		return s.objs, true
	}
	return nil, false
}

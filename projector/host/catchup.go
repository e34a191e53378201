package host

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

// catchUp reads the new events of the partitions the local changes touch. If one
// of them changes a locally changed path to other content, it stops with a
// *ConflictError; otherwise it applies them (scoped: the HWM does not move)
// and returns how many it applied.
func (h *Host) catchUp(ctx context.Context, s *session, changes []ledger.Entry) (int, error) {
	sr := SyncResult{}
	r := &run{h: h, s: s, res: &sr}
	recs, err := h.partitionTails(ctx, r, changes)
	if err != nil {
		return 0, err
	}
	if conflicts := projector.Conflicts(changes, recs); len(conflicts) > 0 {
		return 0, &ConflictError{Paths: conflicts}
	}
	for _, rec := range recs {
		if err := r.offer(ctx, projector.Scoped, rec); err != nil {
			return 0, err
		}
	}
	if err := r.flush(ctx); err != nil {
		return 0, err
	}
	return sr.Applied, nil
}

// partitionTails is the one catch-up read of a partition: the events of the
// partitions of changes that this host has not read (after each one's mark),
// partition by partition in key order, each resolved (its manifest read) by
// r. A partition whose last seq is at its mark is not read.
func (h *Host) partitionTails(ctx context.Context, r *run, changes []ledger.Entry) ([]ledger.Record, error) {
	parts := map[string]bool{}
	for _, e := range changes {
		parts[ledger.PartitionKey(e.Path)] = true
	}
	var recs []ledger.Record
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		mk, err := r.s.core.Mark(p)
		if err != nil {
			return nil, err
		}
		last, err := h.logPort().PartitionLastSeq(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("read last seq of partition %q: %w", p, err)
		}
		if last <= mk.Seq {
			continue
		}
		err = h.logPort().ReadPartition(ctx, p, mk.Seq+1, func(rec ledger.Record) error {
			if err := r.resolve(ctx, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return nil, needsRebuild(fmt.Errorf("read partition %q: %w", p, err))
		}
	}
	return recs, nil
}

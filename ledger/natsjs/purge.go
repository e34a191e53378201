package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// TruncateBefore drops the events with seq < before (retention, docs/design.md §6),
// except the last event of every partition.
//
// It purges partition by partition: for each subject holding more than one
// message it reads the subject's last seq (through the stream leader) and purges
// the subject's messages below min(before, last). A whole-stream purge up to
// before would be one request, but it would empty the subjects of partitions
// whose last event is older than before; the server cannot tell an emptied
// subject from a new one, so such a partition's chain could restart at Prev 0
// while hosts hold marks on the old chain (see the package doc, Retention).
//
// Kept partition heads below before leave holes in the stream: its first seq
// stays at the oldest kept head, and every read that reaches a purged seq fails
// with ledger.ErrTruncated, as a read below the first seq does. An event
// appended concurrently is never dropped: it lands above the last seq read for
// its subject. The stream's DenyDelete setting does not forbid purges (only
// DenyPurge would, which ledgers never set).
func (l *logDriver) TruncateBefore(ctx context.Context, before ledger.Seq) (uint64, error) {
	l.opened.drop()
	s, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return 0, fmt.Errorf("ledger %q truncate before %d: %w", l.name, before, l.mapStreamErr(err))
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(l.prefix+">"))
	if err != nil {
		return 0, fmt.Errorf("ledger %q truncate before %d: list subjects: %w", l.name, before, l.mapStreamErr(err))
	}
	if info.State.FirstSeq >= uint64(before) {
		return 0, nil // nothing below before
	}
	var dropped uint64
	for _, subj := range slices.Sorted(maps.Keys(info.State.Subjects)) {
		if info.State.Subjects[subj] < 2 {
			continue // only the partition's head: kept
		}
		last, err := l.leaderLastSeq(ctx, subj)
		if err != nil {
			return dropped, fmt.Errorf("ledger %q truncate before %d: last seq of %s: %w", l.name, before, subj, err)
		}
		cut := min(before, last) // purge below cut: keeps the head and everything ≥ before
		if cut <= 1 {
			continue
		}
		n, err := l.purge(ctx, subj, cut)
		dropped += n
		if err != nil {
			return dropped, fmt.Errorf("ledger %q truncate before %d: purge %s below %d: %w", l.name, before, subj, cut, err)
		}
	}
	return dropped, nil
}

// purge sends one stream purge request for subj with seq (messages below seq).
func (l *logDriver) purge(ctx context.Context, subj string, seq ledger.Seq) (uint64, error) {
	body, err := json.Marshal(struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq"`
	}{subj, uint64(seq)})
	if err != nil {
		return 0, err
	}
	var resp struct {
		apiResponse
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
	}
	if err := l.request(ctx, apiPrefix+"STREAM.PURGE."+l.stream, body, &resp); err != nil {
		return 0, l.mapErr(err)
	}
	if !resp.Success {
		return resp.Purged, errors.New("purge not successful")
	}
	return resp.Purged, nil
}

func (l *logDriver) mapStreamErr(err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s: %w", l.stream, ledger.ErrNotFound)
	}
	return err
}

package memledger

import (
	"context"
	"maps"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// Attested implements ledger.CommitLog.
func (l *logDriver) Attested(ctx context.Context) (ledger.Attestations, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ledger.Attestations{Snapshots: maps.Clone(l.att.Snapshots), Retained: l.att.Retained}, nil
}

// AttestSnapshot implements ledger.CommitLog (an in-memory log has no roles:
// it always may), keeping the newest ledger.MaxAttested.
func (l *logDriver) AttestSnapshot(ctx context.Context, seq ledger.Seq, sum ledger.Digest) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.att.Snapshots == nil {
		l.att.Snapshots = map[ledger.Seq]ledger.Digest{}
	}
	l.att.Snapshots[seq] = sum
	for _, s := range slices.Sorted(maps.Keys(l.att.Snapshots)) {
		if len(l.att.Snapshots) <= ledger.MaxAttested {
			break
		}
		delete(l.att.Snapshots, s)
	}
	return nil
}

// AttestRetention implements ledger.CommitLog.
func (l *logDriver) AttestRetention(ctx context.Context, before ledger.Seq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.att.Retained = max(l.att.Retained, before)
	return nil
}

// SetRetention implements ledger.CommitLog.
func (l *logDriver) SetRetention(ctx context.Context, before ledger.Seq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.att.Retained = before
	return nil
}

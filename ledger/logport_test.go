package ledger_test

import (
	"context"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// stubLog answers the reads a sync makes most, from nothing.
type stubLog struct{ ledger.LogDriver }

func (stubLog) Info() ledger.Info { return ledger.Info{Name: "stub"} }
func (stubLog) LastSeq(context.Context) (ledger.Seq, error) {
	return 1000, nil
}
func (stubLog) PartitionLastSeq(context.Context, string) (ledger.Seq, error) {
	return 1000, nil
}
func (stubLog) PartitionTip(context.Context, string) (ledger.Seq, string, error) {
	return 1000, "", nil
}
func (stubLog) CommitAt(context.Context, ledger.Seq) (string, error) { return "", nil }

// TestLogChecksAllocateNothing: the portable log's checks cost the hot
// reads of a sync no allocation (an operation's name is formatted only
// when its context is done).
func TestLogChecksAllocateNothing(t *testing.T) {
	l := ledger.NewLog(stubLog{})
	ctx := context.Background()
	p := "models/some-partition"
	n := testing.AllocsPerRun(100, func() {
		_, _ = l.LastSeq(ctx)
		_, _ = l.PartitionLastSeq(ctx, p)
		_, _, _ = l.PartitionTip(ctx, p)
		_, _ = l.CommitAt(ctx, 123456)
	})
	if n != 0 {
		t.Errorf("%v allocations per round of LastSeq, PartitionLastSeq, PartitionTip, CommitAt; want 0", n)
	}
}

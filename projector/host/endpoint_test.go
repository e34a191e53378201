package host

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// mirrorLog is a region's log as the publish stage sees it: its reads from a
// mirror (the embedded log: it takes no append, as a mirror's stream
// refuses one), its appends through the write endpoint, the origin.
type mirrorLog struct {
	ledger.CommitLog // the mirror: reads
	origin           ledger.CommitLog
	appends          *atomic.Int64 // appends sent to the origin
}

func (l mirrorLog) Append(ctx context.Context, evs []ledger.Event, fences ...ledger.Fence) ([]ledger.Seq, error) {
	l.appends.Add(1)
	return l.origin.Append(ctx, evs, fences...)
}

// mirrorOnly is a mirror: it reads the origin's log and refuses appends.
type mirrorOnly struct{ ledger.CommitLog }

func (mirrorOnly) Append(context.Context, []ledger.Event, ...ledger.Fence) ([]ledger.Seq, error) {
	return nil, fmt.Errorf("append to a mirror: %w", ledger.ErrPermission)
}

// TestPublishWritesToTheOrigin: the publish stage appends to the write
// endpoint only (writeLog: the origin), through every layer the host puts
// around its log port (the operation's watch, the failpoints), while the
// rest of the push — the last commit's check, a chain conflict's catch-up
// — reads from where the log reads: a host whose log reads a mirror that
// refuses appends publishes, once per publish, and catches up with another
// host's commit.
func TestPublishWritesToTheOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var appends atomic.Int64
	b := e.hostAt("b", t.TempDir())
	b.cfg.Log = mirrorLog{CommitLog: mirrorOnly{e.log}, origin: e.log, appends: &appends}
	a := e.host("a")

	writeFile(t, b, "data/m/x/d/1/raw", "b's first")
	if res := mustCommit(t, b, ""); len(res.Commits) != 1 || appends.Load() != 1 {
		t.Fatalf("b's commit: %+v, %d appends to the origin; want one commit, one append", res, appends.Load())
	}
	// A commit of a to the partition b commits to next: b's publish meets
	// a chain conflict at the origin, catches up (reads) and publishes again.
	mustSync(t, a, SyncOptions{})
	writeFile(t, a, "data/m/x/d/2/raw", "a's")
	mustCommit(t, a, "")
	writeFile(t, b, "data/m/x/d/3/raw", "b's second")
	res := mustCommit(t, b, "")
	if len(res.Commits) != 1 || res.Attempts != 2 || res.Pulled == 0 || appends.Load() != 3 {
		t.Fatalf("b's commit after a's: %+v, %d appends to the origin; want one commit in 2 attempts after a catch-up, 3 appends in all", res, appends.Load())
	}
	if head, err := e.log.LastSeq(context.Background()); err != nil || head != 3 {
		t.Fatalf("the origin's head %d, %v; want the 3 commits", head, err)
	}
}

package natsjs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestCommitLogConformance runs the ledger.CommitLog suite on the adapter, a
// ledger per subtest on one server (memledger runs the same suite).
func TestCommitLogConformance(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	n := 0
	drivertest.TestCommitLog(t, func(t *testing.T) drivertest.LogFixture {
		n++
		l, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: fmt.Sprintf("conf%d", n), Blobs: "file:///tmp/blobs"}, WithFollowIdle(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return drivertest.LogFixture{
			Driver: l.Driver(),
			Publish: func(subject string, data []byte) (ledger.Seq, error) {
				ack, err := l.d.js.Publish(testCtx(t), subject, data)
				if err != nil {
					return 0, err
				}
				return ledger.Seq(ack.Sequence), nil
			},
			// The stream stops republishing (an admin's update): what a
			// follower misses when a republish is lost.
			MissNotices: func(t *testing.T) func() {
				setRePublish(t, l, false)
				return func() { setRePublish(t, l, true) }
			},
			ReaderState: func(ctx context.Context) (int, error) { return consumers(ctx, l) },
		}
	})
}

// TestFeedConformance runs the ledger.Feed suite on the adapter, a ledger per
// subtest on one server (memledger runs the same suite).
func TestFeedConformance(t *testing.T) {
	t.Parallel()
	s, nc := natsjstest.RunServer(t)
	n := 0
	drivertest.TestFeed(t, func(t *testing.T) drivertest.FeedFixture {
		n++
		name := fmt.Sprintf("feed%d", n)
		l, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: name, Blobs: "file:///tmp/blobs"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := NewFeed(nc, name)
		if err != nil {
			t.Fatal(err)
		}
		return drivertest.FeedFixture{Log: l, Driver: f.Driver(), Crashable: func(t *testing.T) (ledger.Feed, func()) {
			other := natsjstest.Connect(t, s.ClientURL())
			f, err := NewFeed(other, name)
			if err != nil {
				t.Fatal(err)
			}
			return f, other.Close
		}}
	})
}

// setRePublish turns the republish of l's stream on or off.
func setRePublish(t *testing.T, l *Log, on bool) {
	t.Helper()
	ctx := testCtx(t)
	st, err := l.d.js.Stream(ctx, l.d.stream)
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	c.RePublish = nil
	if on {
		c.RePublish = ledgerRePublish(l.d.name)
	}
	if _, err := l.d.js.UpdateStream(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// consumers returns how many consumers l's stream has.
func consumers(ctx context.Context, l *Log) (int, error) {
	st, err := l.d.js.Stream(ctx, l.d.stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Consumers, nil
}

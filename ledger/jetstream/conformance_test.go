package jetstream

import (
	"fmt"
	"testing"

	"github.com/syncledger/syncledger/internal/ledgertest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/jetstream/jstest"
)

// TestCommitLogConformance runs the ledger.CommitLog suite on the adapter, a
// ledger per subtest on one server (memledger runs the same suite).
func TestCommitLogConformance(t *testing.T) {
	t.Parallel()
	_, nc := jstest.RunServer(t)
	n := 0
	ledgertest.TestCommitLog(t, func(t *testing.T) ledgertest.LogFixture {
		n++
		l, err := Create(testCtx(t), nc, Config{Name: fmt.Sprintf("conf%d", n), Blobs: "file:///tmp/blobs"})
		if err != nil {
			t.Fatal(err)
		}
		return ledgertest.LogFixture{Log: l, Publish: func(subject string, data []byte) (ledger.Seq, error) {
			ack, err := l.js.Publish(testCtx(t), subject, data)
			if err != nil {
				return 0, err
			}
			return ledger.Seq(ack.Sequence), nil
		}}
	})
}

// TestFeedConformance runs the ledger.Feed suite on the adapter, a ledger per
// subtest on one server (memledger runs the same suite).
func TestFeedConformance(t *testing.T) {
	t.Parallel()
	s, nc := jstest.RunServer(t)
	n := 0
	ledgertest.TestFeed(t, func(t *testing.T) ledgertest.FeedFixture {
		n++
		name := fmt.Sprintf("feed%d", n)
		l, err := Create(testCtx(t), nc, Config{Name: name, Blobs: "file:///tmp/blobs"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := NewFeed(nc, name)
		if err != nil {
			t.Fatal(err)
		}
		return ledgertest.FeedFixture{Log: l, Feed: f, Crashable: func(t *testing.T) (ledger.Feed, func()) {
			other := jstest.Connect(t, s.ClientURL())
			f, err := NewFeed(other, name)
			if err != nil {
				t.Fatal(err)
			}
			return f, other.Close
		}}
	})
}

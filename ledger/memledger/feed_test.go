package memledger_test

import (
	"fmt"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/memledger"
)

func TestFeedConformance(t *testing.T) {
	n := 0
	drivertest.TestFeed(t, func(t *testing.T) drivertest.FeedFixture {
		n++
		l, err := memledger.New(ledger.Info{Name: "test", UUID: fmt.Sprintf("22222222-2222-4222-8222-%012d", n), Blobs: "mem://"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := memledger.NewFeed(l, nil)
		return drivertest.FeedFixture{Log: l, Driver: f.Driver(), Crashable: func(*testing.T) (ledger.Feed, func()) {
			return f, f.Disconnect
		}}
	})
}

package memledger_test

import (
	"fmt"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/memledger"
)

func TestCommitLogConformance(t *testing.T) {
	n := 0
	drivertest.TestCommitLog(t, func(t *testing.T) drivertest.LogFixture {
		n++
		l, err := memledger.New(ledger.Info{Name: "test", UUID: fmt.Sprintf("11111111-1111-4111-8111-%012d", n), Blobs: "mem://"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return drivertest.LogFixture{Log: l, Publish: func(subject string, data []byte) (ledger.Seq, error) {
			return l.Publish(subject, data), nil
		}}
	})
}

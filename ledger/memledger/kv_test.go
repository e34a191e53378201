package memledger_test

import (
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/memledger"
)

func TestKVConformance(t *testing.T) {
	drivertest.TestKV(t, func(*testing.T) ledger.KV { return memledger.NewKV(nil) })
}

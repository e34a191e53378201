package drivertest

import (
	"testing"

	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// TestSuitesOnMemBucket runs the suites on memledger's in-memory driver: the
// plainest implementation, showing that everything they ask for is
// satisfiable by it.
func TestSuitesOnMemBucket(t *testing.T) {
	TestBucket(t, Harness{
		New: func(*testing.T) driver.Bucket { return memledger.NewBucket(nil) },
		NoBucket: func(*testing.T) driver.Bucket {
			b := memledger.NewBucket(nil)
			b.Remove()
			return b
		},
		Denied: func(*testing.T) driver.Bucket {
			b := memledger.NewBucket(nil)
			b.Deny(true)
			return b
		},
	})
}

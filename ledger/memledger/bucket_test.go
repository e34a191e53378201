package memledger_test

import (
	"testing"

	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// TestBucketConformance runs the blob suites on the in-memory driver: the
// plainest implementation, showing that everything they ask for is
// satisfiable by it.
func TestBucketConformance(t *testing.T) {
	t.Parallel()
	drivertest.TestBucket(t, drivertest.Harness{
		New:      func(*testing.T) driver.Bucket { return memledger.NewBucket(nil) },
		NoBucket: func(*testing.T) driver.Bucket { return memledger.MissingBucket() },
		Denied:   func(*testing.T) driver.Bucket { return memledger.DeniedBucket() },
	})
}

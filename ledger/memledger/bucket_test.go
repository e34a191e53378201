package memledger_test

import (
	"testing"

	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/memledger"
)

func TestBucketConformance(t *testing.T) {
	t.Parallel()
	drivertest.TestBucket(t, drivertest.Harness{
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

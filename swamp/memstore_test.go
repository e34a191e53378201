package swamp

import (
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// newMemStore returns an in-memory bucket (memledger's driver, every object
// stored at the Unix epoch), for tests where a file store's fsyncs would
// dominate the run time.
func newMemStore() *ledger.Bucket {
	return ledger.NewBucket(memledger.NewBucket(func() time.Time { return time.Unix(0, 0) }), ledger.RetryPolicy{Attempts: 1})
}

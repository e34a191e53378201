// Package drivertest holds the conformance suites every implementation of a port
// runs from its own tests (the NATS adapter, the blob drivers and
// ledger/memledger alike), as go-cloud's blob/drivertest: a driver outside this
// module can run them too. TestCommitLog, TestFeed and TestKV are for the log,
// its feed and the side buckets (TestCommitLog is given a ledger.LogDriver and
// runs on the portable ledger.Log over it, TestFeed a ledger.FeedDriver and
// the portable feed over it, each counting the driver's calls: what the
// portable type refuses never reaches the driver); TestBucket is for a blob driver
// (ledger/driver.Bucket), through the ledger.Bucket over it:
//
//   - TestObjectStore: keyed objects — ErrNotFound for absent objects,
//     ErrInvalid for keys that are not portable, lexical List order, atomic
//     puts (a failed or cancelled put leaves nothing, or the previous object,
//     visible), reading the put's input to EOF, batches (their own puts and
//     stats, a failed put among good ones), and a body cut part way continued;
//   - TestBlobStore: content-addressed blobs — ErrChecksum for corrupted,
//     truncated or extended blobs and for content that does not hash to its
//     digest, idempotent puts, a squatted key never taken for the blob, a
//     batch's puts retried, a body cut short never read as other content;
//   - TestNoBucket: a bucket that does not exist — every operation, keyed,
//     blob and batched, fails with ledger.ErrNoBucket (never ErrNotFound),
//     after one call of the driver;
//   - TestPermission: a store that refuses the driver's credentials — every
//     operation fails with ledger.ErrPermission, after one call.
//
// A driver's test gives TestBucket a Harness: a constructor of the driver of
// a new, empty bucket (a fresh directory, bucket prefix or bucket; each
// subtest gets its own), one of a bucket that does not exist, and one of a
// bucket that denies it.
//
//	func TestConformance(t *testing.T) {
//		drivertest.TestBucket(t, drivertest.Harness{New: newStore, NoBucket: missing, Denied: denied})
//	}
package drivertest

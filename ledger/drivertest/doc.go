// Package drivertest holds the conformance suites every implementation of a port
// runs from its own tests (the NATS adapters and ledger/memledger alike):
// TestCommitLog, TestFeed and TestKV for the log, its feed and the side buckets;
// TestObjectStore for a ledger.ObjectStore, and TestBlobStore for the
// content-addressed ledger.BlobStore that ledger.NewBlobStore builds on it.
//
// A backend's test calls both with a constructor that returns a new, empty store on
// each call (a fresh directory, bucket prefix or bucket); each subtest gets its own.
//
//	func TestConformance(t *testing.T) {
//		drivertest.TestObjectStore(t, newStore)
//		drivertest.TestBlobStore(t, newStore)
//	}
//
// The suites pin down what the interfaces leave to prose: ErrNotFound for absent
// objects, ErrInvalid for keys that are not portable, lexical List order, atomic
// puts (a failed or cancelled put leaves nothing, or the previous object, visible),
// reading the put's input to EOF, and ErrChecksum for corrupted or truncated blobs.
package drivertest

package host

import "github.com/syncledger/syncledger/ledger"

// BlobStack returns the blob store a host runs on over the object store objs:
// the content-addressed layer over the retrying store (transient failures —
// 5xx, resets, timeouts — retried with backoff under the default policy; a
// commit that still cannot upload fails before it publishes anything). The
// CLI and the bench both open hosts on it, so the bench measures the stack
// hosts run.
func BlobStack(objs ledger.ObjectStore) ledger.BlobStore {
	return ledger.NewBlobStore(ledger.NewRetryingStore(objs, ledger.RetryPolicy{}))
}

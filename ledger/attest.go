package ledger

// The blob store is no authority on what it holds beside the blobs: every role
// that may write a blob may write any object there (a NATS object store
// cannot tell a snapshot's key from a blob's, and S3 or GCS credentials that
// put blobs put anything under the prefix). So a snapshot, whose word decides
// what a rebuilt host holds and what blob GC keeps, counts only when the log
// attests it: the admin, who alone may write there, records the SHA-256 of the
// snapshot's stored bytes in the log when it takes one, and readers use a
// snapshot only if what they read hashes to that. The retention bound (the
// seq below which the log may have dropped events) is attested the same way.
// (natsjs.Log keeps attestations in its stream's metadata, which only the
// admin role may update.)

// Attestations are what the log attests about the objects beside the blobs.
type Attestations struct {
	// Snapshots maps a snapshot's seq to the SHA-256 of its stored object.
	Snapshots map[Seq]Digest
	// Retained is the bound of the last retention run: the log may lack events
	// below it (0: none dropped).
	Retained Seq
}

// MaxAttested is how many snapshots a CommitLog attests at most: the newest ones.
// An older snapshot is not trusted any more (rebuilds use a newer one).
const MaxAttested = 64

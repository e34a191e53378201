// Package ledger holds syncledger's domain: the types of a commit and its events,
// swamp's partition-key function, subject-token escaping, the strict event codec,
// path validation, and the ports the rest of the system is built on: CommitLog
// (the ordered, chained event stream, its quarantine notices and retention), Feed
// (durable, filtered, acknowledged delivery of the log to named consumers, with a
// dead letter), KV (revision-checked side buckets on the server's clock) and
// Bucket, the object storage: content-addressed file content (Put, Get, …) and,
// beside the blobs, keyed objects (snapshots). Every CommitLog handed out is
// Log, a concrete type over a small driver (LogDriver: ledger/natsjs's,
// memledger's): it checks the context, a commit (CheckAppend, then encodes
// its events and fence checks: AppendBatch), a fence record, a quarantine
// notice and the bounds once, before the driver is called; callers and
// decorators hold the CommitLog interface. Every Feed handed out is
// PortableFeed, over a FeedDriver the same way: it checks the context, a
// consumer (CheckFeedConsumer) and a consumer's name once. Bucket is a concrete type over a
// small driver (ledger/driver.Bucket: ledger/fileblob, s3blob, gcsblob,
// natsblob, memledger's), after go-cloud's blob: what every backend must do it
// does once — key and context checks, the closed state, error codes to
// sentinels, the one RetryPolicy with its bounds, content addressing and
// verification, batches — and a driver does only what its backend must.
// Commits is the one commit grouper every reader uses: strict for a full read
// of the log, filtered for a partition filter's or a feed's. Every
// implementation of a port passes its conformance suite (ledger/drivertest) —
// the NATS adapter (ledger/natsjs), the blob drivers and the in-memory twin
// (ledger/memledger) alike — and decodes stored messages with the one
// MessageReader. It imports only the standard library, github.com/google/uuid
// and its own ledger/driver.
//
// # Protocol
//
// A commit is a set of entries (files written or deleted) made by one host at once.
// Entries are grouped by partition (swamp's per-model index shard, see PartitionKey).
// Each (commit, partition) pair becomes one Event; a commit that touches k partitions
// is k events published atomically (all or none, consecutive stream seqs), and a
// reader treats a commit as complete only once it has read all Parts of it.
//
// Within a partition, events form a chain: ModelSeq 1, 2, 3, … with Prev holding the
// stream seq of the previous event of the same partition (0 for ModelSeq 1). The log
// enforces the chain at write time: an append whose Prev is not the partition's
// current last seq fails with ErrConflict and stores nothing.
//
// Fences: a commit made under a lock kept beside the log (swamp's locks, on a
// KV bucket with a TTL) carries the lock's Fence, the seq of the fence record
// its holder stored on the lock's fence subject when it took the lock
// (CommitLog.TakeFence). Its atomic batch ends with one fence check per fence,
// which the log stores only while that record is still the lock's last: once
// another holder took the lock (and stored its own record), the append fails
// with a *LockLostError (ErrLockLost) and stores nothing — where the write
// happens, not only before it. A lost lock is told before a chain conflict
// and is never retried. Fence records and checks are no events: readers hand
// them out as Records with Skip set (Skip.Fence, Skip.Check).
//
// Content first: every blob an event references, and the manifest holding entries
// too large to inline, is stored in the BlobStore before the event is published, so
// no event ever references a missing blob. Publish is the one way to publish a
// commit so: the caller stores the content, Publish the manifests, then appends;
// a bulk writer stores them in a BlobBatch, which PublishBatch flushes — every
// blob durable — before it appends.
//
// Sequence numbers: a Seq is a stream sequence, gapless in the stream; the commit's
// seq is the seq of its last event. The stream may drop events only below the oldest
// seq a snapshot covers; a read that asks for a seq below the stream's first seq
// fails with ErrTruncated rather than silently starting later.
package ledger

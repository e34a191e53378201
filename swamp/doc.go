// Package swamp is syncledger's interop with swamp's remote datastore (the
// @swamp/s3-datastore and @swamp/gcs-datastore extensions; facts in
// ../shared/reference/swamp-datastore.md), so that adopting syncledger is not a
// flag day. Its formats live in swamp/index. Three tools:
//
//   - Import reads a swamp datastore and publishes the ledger's first commits;
//   - Mirror keeps a swamp v2 layout up to date from a ledger, for swamp hosts
//     that have not moved;
//   - Doctor checks a swamp host's cache against its remote index and repairs
//     the #3193 state in the sync-state sidecar.
//
// Setup installs the @syncledger/datastore extension (extension/syncledger.ts)
// in a swamp repo, and NamespaceLedger names a namespace's ledger. The agent
// that extension talks to, with its protocol, locks and control plane, is
// package swamp/agent.
//
// # Reading a datastore
//
// ReadRemote reads what an unscoped swamp pull reads: _index/_meta.json v2 and
// all its shards; else the v1 monolith .datastore-index.json; else a listing of
// the objects. In namespaced mode every key is under "{ns}/". Internal files
// (swamp's isInternalCacheFile: the index and sidecar names, _index/,
// _control/, any .lock, .namespace.json, _catalog.db and _catalog.db-*, and
// the .locks/ lock directory) are never imported; a solo-mode listing also
// skips top-level directories that hold another namespace.
//
// # Import: one commit per partition, resumable
//
// Partitions are ledger.PartitionKey of each path (swamp's shard key where
// swamp has one). For each, in key order, Import copies the objects into the
// blob store under their SHA-256 (downloaded once, hashed, compared with the
// entry's sha256 and size where present, then stored) and publishes a
// single-partition commit built with projector.CommitEvents on the marks the
// log reports (PartitionHead), and publishes it through ledger.Publish, the
// one content-first publish a host's commit uses too: the manifest stored first
// when the entries do not fit inline, then appended with the log's chain check.
//
// Idempotence does not depend on commit ids: an import commit's message starts
// with "swamp import" and, when it holds the partition's complete source file
// list, ends with the trailer "Swamp-Import-Fingerprint: <sha256 of that
// list>". A re-run skips a partition whose last import commit carries the
// current fingerprint, and otherwise publishes only the difference between the
// source and the ledger's files of the partition (nothing if there is none).
// Everything an import commit references is stored before it is appended, so a
// crash at any point, followed by a re-run, gives the same ledger as one
// uninterrupted run. A chain conflict (another writer extended the partition
// between the read and the append) re-reads the partition and tries again. A
// partition whose head is not an import commit (hosts have committed to it)
// and whose source changed since its last import is reported as a conflict
// and left alone.
//
// # Mirror: order and restart
//
// Mirror reads the log in seq order and mirrors each complete commit (all its
// parts) as one swamp v2 commit, in this order: the data objects at their rel
// keys (copied from verified blobs), the shards _index/{partition}.json of the
// partitions it touched (all the partition's entries, with swamp's IndexEntry
// fields key, size, lastModified = the commit's time, sha256), then
// _index/_meta.json with the sorted partitions and commitSeq one higher, then
// its position record _control/syncledger-mirror.json (ledger UUID, last
// mirrored seq, commitSeq, pending deletions). A reader that reads the meta
// therefore finds every shard it lists and every object those shards name.
// Objects the new meta no longer reaches (deleted files, emptied shards) are
// deleted only after DeleteGrace, so a reader still working from the previous
// meta finds them too.
//
// On start the mirror reads its position record and rebuilds its index from
// the target's meta and shards; a crash anywhere in a commit's writes makes it
// redo that commit (the writes are idempotent; commitSeq only grows). It
// refuses a target that holds a swamp index but no position record
// (ErrForeignLayout) or that mirrors another ledger (ledger.ErrLineage): it must
// be the only writer of its layout.
//
// # Doctor and the #3193 state
//
// swamp's pull returns at once when the sidecar's commitSeq equals the remote
// meta's (the commitSeq fast path), checking nothing local. swamp-club#3193:
// a model-scoped pull followed by a no-op two-phase push armed that commitSeq
// over an index holding one model only, hiding other hosts' files until the
// next remote commit. Doctor reports the files the remote index has and the
// cache lacks (or holds with another size or sha256) and flags State Armed when
// the sidecar's commitSeq equals the remote's while such files exist. Repair
// writes a backup of the sidecar outside the cache, then removes commitSeq and
// empties remoteIndexETag / remoteIndexGeneration (Sidecar.Disarm), so swamp's
// next pull assembles every shard and downloads what is missing. It changes no
// other field and no data file.
package swamp

// Package snapshot writes, finds and reads snapshots of a ledger's index. The two
// jobs snapshots make safe, retention (dropping old events from the log) and blob
// garbage collection, are the ledger's upkeep, in package maintain (docs/design.md §6).
//
// # What a snapshot is
//
// A snapshot is the index a host holds once it has applied every event up to a
// commit boundary seq N (its HWM): every file (path, sha256, size, mode, and the
// seq of the event that wrote it), every partition's mark, the ledger's UUID and
// N. Host-local facts (mtimes, lazy flags) are not in it. A host restored from a
// snapshot at N and then synced from N+1 holds exactly what a host that synced
// live holds (package projector/host, Rebuild).
//
// Snapshots are built from the log, not from a host's cache (Take, Build): the
// newest usable snapshot plus the events after it, replayed in memory through the
// projector core — the same apply rules a host's full sync runs — with no blob
// fetched but manifests. Building needs no cache, so any process that reaches the
// log and the blob store can take snapshots (`syncledger snapshot`, or
// maintain.Run with a Policy embedded in a long-running process).
//
// # Format and storage
//
// A snapshot is one object in the ledger's object store, beside the blobs, at
//
//	snapshots/<ledger uuid>/<seq, 20 digits>.snap.zst
//
// holding a zstd stream (with its frame checksum) of JSON lines: a header
// {"v":1,"kind":"syncledger-snapshot","ledger","name","seq","entries","marks",
// "bytes"}, the entries in path order {"path","sha256","size","mode","seq"}, the
// marks in partition order {"partition","modelSeq","seq"}, and a trailer
// {"end":"syncledger-snapshot","sha256"} with the SHA-256 of every line before
// it. Decoding is strict (unknown fields, wrong counts, trailing data, an unknown
// version are errors) and checks the snapshot's consistency (Validate). Encoding
// is deterministic, so two processes snapshotting the same seq store the same
// bytes.
//
// An object store's put is atomic: a snapshot is visible only once complete.
// Listing, not a pointer, decides which snapshot is newest (the highest seq);
// one that does not read back (truncated, a flipped byte, an unknown version) is
// skipped with a warning and the next older one is used (Select).
//
// # Attestation, adoption and the retention bound
//
// The object store is no authority on what it holds beside the blobs: any role
// that writes blobs may write there. A snapshot is read only if the log attests
// it (ledger.Attestations; Put attests what it stores, the admin's word), and
// the retention bound the log attests is read only where the log does not
// contradict it (Floor ignores one above its head). Adopt attests stored
// snapshots the log does not: those a replay of the log verifies, and, where the
// log can no longer verify them, only on a ledger that never attested (the
// upgrade from a release before attestations) or when the admin names them —
// never one the log contradicts. CheckRetention, SetRetention and WrongBound
// check and correct a bound against the log itself. Inventory lists every object
// under Prefix, for an admin to judge.
package snapshot

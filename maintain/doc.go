// Package maintain is the ledger's upkeep: the jobs that keep the log and the blob
// store from growing without bound, which snapshots (package projector/snapshot)
// make safe. Nothing here projects the log into a cache.
//
// Run takes snapshots by policy and, with a margin, runs Retain after each;
// `syncledger snapshot` and `syncledger gc` run the same code once.
//
// # Retention
//
// Retain drops the log's events older than the newest intact snapshot minus a
// margin, never newer ones, keeping each partition's last event (so its chain can
// still be extended; see ledger.CommitLog.TruncateBefore). The bound is then recorded at
// snapshots/<uuid>/retention.json; snapshot.Floor combines it with the log's first seq:
// the lowest seq from which the log holds every event. A snapshot at N is usable
// when N+1 ≥ Floor. A margin at least the snapshot interval keeps the previous
// snapshot usable, so a corrupt newest snapshot does not stop a rebuild.
//
// # Garbage collection
//
// GC deletes blobs that no usable snapshot and no event from the floor on
// references (including manifests and their entries) and that are older than a
// grace period, then the snapshots no rebuild can use any more. Its reference set
// is deliberately wider than "the newest snapshot and the events after it": a host
// whose HWM is behind the newest snapshot still syncs through the older events
// and fetches every version they wrote, and a rebuild may have to fall back to an
// older snapshot. Blobs therefore become garbage once retention has dropped the
// events that referenced them. See GC for the one race a grace period cannot
// close and how it is detected.
package maintain

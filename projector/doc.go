// Package projector is the pure core of a host's projector: the state machine that
// decides, for every event the ledger's log delivers, whether it is applied,
// skipped or missing something, and how far the host's high-water mark (HWM) may
// move. It does no I/O, reads no clock, starts no goroutine and draws no random
// number; the I/O shell (which reads the log, fetches blobs, writes the cache and
// persists the state) drives it, the way etcd's raft core is driven: the shell
// offers records (Step, RecordOwn), takes the work they imply (Ready), makes it
// durable, and acknowledges it (Advance).
//
// # State
//
// A host's durable state is its ledger UUID (lineage), its HWM, one Mark per
// partition and the index (path → File: sha256, size, mode, lazy), persisted
// atomically as one unit. A Mark (modelSeq, seq) is the last event of the
// partition the host has applied, contiguously from modelSeq 1.
//
// The core does not hold that state: it reads it through a Storage (etcd
// raft's Storage is the model), the shell's persisted state — projector/statedb
// over the cache's database, a MemoryStorage in tests, the simulator and
// in-memory replays. A step reads only what it needs: the marks of the
// partitions it touches, the rows of the paths it changes, and, for the
// file-and-directory rule, whether rows lie under those paths and the rows of
// the directories above them. So a sync applying one event, or a commit of
// one file, reads a few rows whatever the size of the index; only a full read
// (State, Restore, ShadowedFiles) visits every row. The core keeps in memory
// the lineage and HWM as of the last Advance, the work staged since, and what
// it learned about seqs above the HWM — nothing that grows with the index.
//
// The HWM is the largest seq H such that every event with seq ≤ H has been
// durably applied to this host's cache, and H ends a commit (or H is 0). It is
// computed only from what this host processed (SafeHWM), never from a remote
// counter, a timeout or an "end of stream" answer. It never decreases.
//
// # Apply rules
//
// For an event e of partition p at seq s (Step):
//
//  1. s ≤ mark[p].Seq: skip, the event was applied before (replays are idempotent);
//  2. e.ModelSeq == mark[p].ModelSeq+1 and e.Prev == mark[p].Seq: apply;
//  3. otherwise a gap (GapError): the shell reads p's subject from mark[p].Seq+1
//     (or learns the log was truncated and a snapshot is needed). The core never
//     guesses. An event that contradicts the state (ErrDiverged), belongs to
//     another ledger (ledger.ErrLineage) or is malformed (ledger.ErrInvalid) is
//     refused. The lineage is set only by AdoptLineage, from the log's Info.
//
// An event whose Prev is a quarantined event of its partition carries a
// ledger.Bridge (the log computes it from the notices): rules 2 and 3 then
// also hold for the event before the quarantined run, a link every reader
// knows is skipped. A skipped record (ledger.Skip: a quarantined message, a
// quarantine notice, a lock's fence record or a fenced commit's fence check)
// applies nothing; one of no partition is a commit of its own for the HWM.
//
// A file and a directory of one name (two hosts committed "foo" and "foo/bar"
// to different partitions at once) follow one rule that depends on the index
// alone: the directory wins. The file is shadowed — its row stays, the cache
// holds the directory (OpShadow), and it comes back when the last path under it
// goes (shadow.go). A commit that would create such a clash from the host's
// own index is refused (ErrClash).
//
// A Change lists the versions the Ready's earlier events left at its path
// (Earlier): a cached file holding one is committed content, not a local
// change — the host's own commit whose outcome it never learned (a crash after
// the append), which others have changed since.
//
// # Ordering and the HWM
//
// A full sync reads the whole stream in seq order from HWM+1 (Mode Full). Every
// record it offers, applied or skipped, is processed; after the last part of a
// commit (Part == Parts) is processed, and every seq before it, the HWM may
// move to it. A commit whose first parts were read but whose last part was not
// (a reader may see the first messages of an atomic batch before the last one is
// stored) keeps the HWM before it. Nothing else moves the HWM.
//
// A scoped sync reads only chosen partitions' subjects, each from its mark (Mode
// Scoped). It advances those partitions' marks and never moves the HWM: a
// scoped read says nothing about the other partitions, so an HWM moved past
// events it did not read would make the next full sync start after them and hide
// them for good (swamp-club#3193: a model-scoped pull followed by a no-op push
// armed the remote commit counter and hid other hosts' commits). The events a
// scoped sync applied are skipped by rule 1 when a full sync reaches them, and
// count for the HWM then.
//
// The host's own commit (CommitEvents, the log's Append, then RecordOwn) advances
// its partitions' marks, its files being in the cache already, and counts as
// processed: the HWM moves over it when it starts at HWM+1, and otherwise only
// once a full sync has processed the seqs before it. A commit appended under
// fences (ledger.Fence) ends its batch with their fence checks, right after its
// events, and each fence is a fence record this host stored when it took the
// lock: RecordOwn counts both as processed with the commit, so the HWM passes
// them too.
//
// # Durability and crash recovery
//
// Step, RecordOwn, AdoptLineage and Hydrate only stage. Ready returns the staged
// work coalesced per path (last writer wins): files to fetch and write, to record
// as lazy, to delete, index rows, the marks that moved, and the HWM. The shell
// does the cache work, fsyncs what Ready.MustSync names (every path the Ready
// claims, with the directories on its way: the state must never claim content a
// power cut can take from the cache), persists index rows, marks, HWM and
// lineage in one atomic transaction into the core's Storage, and calls
// Advance; only then does the core's durable state change. Restore stages a Ready that replaces the whole
// state (a rebuild from a snapshot): the same shell path applies it.
// So marks are persisted with every applied event's files, and the HWM only at a
// commit boundary, never ahead of the marks that justify it.
//
// A crash at any point leaves the persisted state of the last completed Ready.
// On restart the shell builds a Core over it (New) and re-reads from HWM+1 (and
// each scoped partition from its mark): rule 1 skips what was applied, the rest is
// applied again, so restart plus re-sync gives the same cache and marks as an
// uninterrupted run. What the core learned about seqs above the HWM is not
// persisted: re-reading learns it again.
package projector

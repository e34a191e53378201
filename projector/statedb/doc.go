// Package statedb persists a host's projector state and the index of its cache in
// one bbolt database inside the cache (.syncledger/state.db).
//
// Everything the projector learns is written in one transaction per Ready: the
// index entries of the files written or deleted, the partition marks and the HWM.
// Files are made durable (fsynced, with their directories) before the
// transaction that records them commits, so the state is never ahead of the
// files, even after a power cut; a crash between the two leaves files the state
// does not yet claim, and the next sync re-applies them (rule 1 does not skip them
// because their marks were not persisted).
//
// An apply (projector/host) therefore has two commit points per Ready, in this
// order: the journal (AddJournal: what the Ready may leave at each path, one
// transaction, before any file is touched), then the files (each fsynced before
// its rename), then each directory they touched fsynced once, then the
// transaction that claims them (index rows, marks, HWM) and clears their journal
// entries. The two cannot be one: the journal must be durable before the first
// rename, the claim only after the last directory fsync. A Ready's journal is
// one record (a value, not a row a path), which the claim deletes: each
// commit point is one transaction of a few pages however many files the
// Ready writes. A record left by an interrupted apply is folded into rows a
// path by the next AddJournal, and stays until a claimed Ready covers them.
//
// The projector's core reads the state through the DB's projector.Storage
// methods (HardState, Mark, Marks, File, Under, Files), lookups in one read
// transaction that lasts until the next write: a row at a time, never the
// whole index for a step. The DB keeps no count of what it reads: a test that
// counts rows wraps the interface they are read through (projector.Storage).
//
// A write transaction at least half of whose new index rows sort right after
// the previous new row (a cold commit's, in path order) has the index's pages
// split at 90% full instead of bbolt's 50%, which would leave a bulk insert's
// pages half empty (the file is mapped: its size is resident memory); other
// transactions keep 50%, room for later inserts among the rows.
//
// bbolt holds an exclusive file lock while the database is open: a second process
// on the same cache gets ErrLocked instead of interleaving writes.
package statedb

// Package fileblob is the blob driver (ledger/driver.Bucket) on a local
// directory, used through a ledger.Bucket (blobs.Open), which checks every key
// for portability (no "..", no absolute path, no empty segment, no backslash:
// ledger.ValidateKey) before the driver sees it, so no key can reach outside
// the root.
//
// A key maps to a path below the root directory: key "blobs/sha256/ab/ab12…" is the
// file <Dir>/blobs/sha256/ab/ab12…, its parent directories created on demand.
// New creates the root; a root gone after that (a disk unmounted, the
// directory removed) is a missing bucket (ledger.ErrNoBucket), which a put
// does not make again. A directory the process may not enter is
// ledger.ErrPermission.
//
// # Atomicity and durability
//
// Put writes the content to a temporary file in the object's own directory
// (named ".syncledger-tmp-*"), fsyncs it, renames it over the key's path and fsyncs
// the directory, so a reader sees the old object or the whole new one, never a part,
// and a crash leaves at worst a stray temporary file. Temporary files are never
// listed, and keys whose segments begin with ".syncledger-tmp-" are rejected with
// ledger.ErrInvalid. A put whose reader fails, whose context is cancelled or whose
// content does not match its declared size removes its temporary file and leaves the
// previous object (if any) in place. New directories are fsynced into their parents;
// Delete fsyncs the directory it removed the file from. Empty directories are
// left in place (removing them would race with a concurrent put into them).
//
// A batch (NewBatch, driver.Batch) writes, fsyncs and renames each file as
// Put does, and leaves the directory fsyncs to Flush: one per directory the
// batch renamed into, not one per object. Until Flush returns an object may
// vanish in a power cut, never come back in part (TestPowerLossFileBatch). Its
// Stat lists a key's directory once and answers a key the listing lacks as
// absent without a syscall (from its second question about the directory: a
// batch of one object stats it); a listed key is stat'ed.
//
// # Limits
//
// A filesystem cannot hold both a file "a" and a directory "a": storing key "a"
// while a key "a/…" exists (or the reverse) fails. Objects are created with mode 0600.
// List walks the directories below the prefix's last "/" in key order without
// collecting the whole listing.
package fileblob

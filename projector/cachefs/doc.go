// Package cachefs is the file side of a host's cache: every write and deletion the
// projector makes goes through it, and so does the commit scan.
//
// Writes are atomic: content goes to a temp file under .syncledger/tmp, is
// verified against its SHA-256 while it is copied, fsynced, and renamed over the
// target. A crash, or a power cut, leaves either the old file or the new one,
// never a torn file, and never a file whose content does not match its hash.
// Write is durable when it returns (the target's directories are fsynced too);
// WriteDeferred and RemoveDeferred are durable once Flush has synced their
// paths, so a batch pays one directory fsync per directory, not per file.
// Durability comes from fsync(2) of files and directories only: syncfs(2) does
// not reach every file system (FUSE never receives it).
// On Windows, directories are not synced (see dirSync; what each platform
// promises is in docs/design.md §9).
//
// Paths are validated again on every call (ledger.ValidatePath) and resolved without
// following symlinks: a path that escapes the cache, goes through a symlink, or
// targets .syncledger/ is refused with ErrUnsafePath and nothing is written.
//
// Every path the ledger accepts is held whatever the cache root's length: an
// operation names its file by the absolute path while the system takes it in
// one call, and otherwise relative to the cache root's directory, one
// directory at a time (os.Root; long.go). A host whose cache root is longer
// than the writer's applies, scans, hashes and removes the same files.
package cachefs

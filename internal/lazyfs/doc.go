// Package lazyfs is a FUSE file system that loses, on command, every write not
// yet fsynced — a power cut, for tests, in the manner of LazyFS (the file
// system Jepsen uses to test etcd and PostgreSQL for power loss).
//
// It keeps the whole tree in memory, each file and directory twice: as it is
// now, and as it was at its last fsync. Drop makes every node what it was at
// its last fsync, which is the strictest reading of POSIX:
//
//   - a file's content, size, mode and mtime are durable once the file is
//     fsynced (fsync or fdatasync);
//   - a name in a directory (created, renamed in or out, removed) is durable
//     once that directory is fsynced; a directory created but never fsynced
//     comes back empty, one never named in a synced parent does not come back;
//   - so a file renamed into place without an fsync of its content comes back
//     empty, and one whose directory was never fsynced does not come back.
//
// syncfs(2) and sync(2) never reach a FUSE file system: only fsync counts, as
// it should for code that means to be durable on any file system.
//
// A test mounts an FS (Mount, which needs root and /dev/fuse: the mount is a
// direct mount(2)), runs its processes on it, kills them all (kill -9), then
// Unmounts, Drops and Mounts again: the processes restart on what a machine
// would find after a power cut. Drop without the unmount would leave the
// kernel's page cache holding what the file system no longer has.
//
// The process that serves the mount must not mmap its files (bbolt does): a
// page fault into the mount from a Go thread can stall the garbage collector
// and with it the server. Run such code in child processes, as the power-loss
// tests do.
//
// The package builds on Linux only (go-fuse's direct mount).
package lazyfs

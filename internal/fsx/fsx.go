// Package fsx holds the file-system calls the durable writers make for every
// file they write — the file blob store (ledger/fileblob), the cache
// (projector/cachefs) and the audit log — and the cache's open of every file
// a scan hashes, in one place.
//
// On unix they call the system directly: os.OpenFile and os.CreateTemp
// register each regular file with the runtime's poller (two fcntl, a failing
// epoll_ctl and two more fcntl to undo it), os.Open of a directory does the
// same, and os.Rename stats its target first; on a small file that is more
// work than the write. Each call is retried on EINTR, as package os does (a
// FUSE file system, such as the power-loss harness's lazyfs, may return it).
// Elsewhere they are package os's calls.
//
// A directory is fsynced to make the names created, renamed or removed in it
// durable (docs/design.md §9), except on Windows (DirSync), where a directory
// handle cannot be flushed and NTFS journals the metadata itself.
package fsx

import "runtime"

// DirSync reports whether SyncDir fsyncs directories on this platform.
const DirSync = runtime.GOOS != "windows"

// Package dirty keeps a cache's dirty set: the paths that may have changed since
// the cache was last scanned whole, so that a commit checks those paths instead
// of walking the cache (issue 17: a commit's cost follows the change, not the
// cache).
//
// # Watcher
//
// A Watcher runs inside the long-running `syncledger watch` (Run, serving the
// socket below), or inside a process that keeps a set for its own commits
// (Watch: the swamp agent, for one swamp command). It watches every
// directory of the cache with inotify (not .syncledger/ nor the _index and
// _control trees) and records each path an event names, with the sequence
// number of its last event. It answers on a unix socket,
// .syncledger/dirty.sock, one JSON request per connection:
//
//   - snapshot: the set as it stands after a barrier (below), its sequence
//     number, the watcher's epoch (a random id per watcher run) and whether it
//     can be trusted;
//   - ack: a commit finished; the watcher forgets the paths it covered that have
//     not changed again since the snapshot (a full scan covers them all, and
//     makes an untrusted set trusted).
//
// # The barrier
//
// inotify delivers events in order but late. Before it answers a snapshot the
// watcher creates a marker file in .syncledger/barrier/, which it also watches,
// and waits until it reads the marker's own event: every change made before the
// request was then read, so the answer covers it.
//
// # When the set cannot be trusted
//
// The set says which paths changed; that no other path changed holds only if a
// watcher saw every change since the last full scan. So a snapshot is trusted
// only when
//
//   - this watcher has run since before a full scan whose ack it received (a
//     new or restarted watcher knows nothing of the changes made while none
//     ran);
//   - the kernel queue has not overflowed since that scan (IN_Q_OVERFLOW);
//   - no directory was moved into, or out of, the watched tree since (its
//     subtree changed without an event per file), and every watch could be
//     added (the inotify watch limit);
//   - the set holds at most MaxPaths paths.
//
// Otherwise the commit scans the whole cache and, if it succeeds, acks the scan
// as full, which makes the set trusted again (once the watcher has listed the
// files with more than one link, below).
//
// # What no event reports
//
// A directory's watch hears of changes made through the names in it, nothing
// else. A trusted snapshot therefore also lists, always, what could change
// without an event: every file with more than one link (a hard link outside
// the cache, or elsewhere in it, can change it: found when the set becomes
// trusted, and by the events that make a name — a new one makes the set
// untrusted until the next full scan, which learns its other names), and every
// mount point inside the cache (another file system, a bind mount). What no
// watch can see remains: a link made from outside the cache, after the set
// became trusted, to a file that then had one link (link(2) reports only to a
// watch of the file itself); the next full scan finds it. A client that finds no watcher
// (no socket, or a socket nobody answers) scans the whole cache too. Hints (the
// paths a caller says it changed: `commit --hint`, the swamp extension's
// markDirty) only ever add paths to a trusted set: a hint is never the evidence
// that a file did not change.
//
// # The committer's side
//
// Every committer (commit, exec, the swamp agent) runs one Round: Begin asks
// for the set (hints added) before the commit, Ack tells the watcher what the
// commit covered once it succeeded (nothing for a commit scoped to
// partitions). A rebuild, which replaces the index without the files, calls
// Untrust. Start runs a watcher beside a long-running command (watch).
package dirty

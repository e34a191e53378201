// Package host is the projector's I/O shell: it binds one host's cache directory
// to a ledger and drives the pure core (package projector) with the log, the blob
// store and the file system — both ways: the pull (Sync, below) and the push
// (Commit, Prepare: the write pipeline, pipeline.go). Both live here because one
// Host holds what they share and change together: the cache lock, the state
// database and the marks a push extends and a pull advances.
//
// # Sync
//
// A full sync reads the log in seq order from HWM+1 up to the last seq it saw when
// it started, offers every record to the core, and applies what the core hands back
// in batches (a projector.Ready): blobs are fetched in parallel (bounded) and
// verified, files are written atomically (cachefs), and only then are the index
// rows, marks and HWM persisted, in one bbolt transaction (statedb). The core moves
// the HWM only at commit boundaries and only over seqs it processed in order, so
// the persisted HWM is never ahead of the files.
//
// A scoped sync (--model/--partition) reads only the chosen partitions' subjects
// from their marks and never moves the HWM (swamp-club#3193).
//
// The core reads the state database through projector.Storage (dbStorage): the
// marks and index rows a step needs, never the whole index, and the shell reads
// the rows' local facts (mtime, seq) the same way; both read the rows through
// one small interface (stateRows), which a test wraps to count them. So a sync applying N events,
// and a commit of a dirty set of N paths, cost O(N) rows whatever the size of
// the cache; a full scan reads each directory's rows as its walk leaves the
// directory (walkTrack), holding no set of the paths it saw.
//
// The fast path costs one request, the log's last seq compared with the HWM (the
// same answer carries the stream's lineage, checked against the cache's; the
// ledger's settings are read once, when the log is opened), and no cache walk.
// A scoped fast path costs one direct get per partition, all sent at once,
// compared with the partitions' marks.
//
// # Crash safety
//
// A crash after files were written but before their Ready was persisted leaves
// files the index does not claim; the next sync offers the same events again
// (their marks did not move) and finds the files already holding the new content.
// A file that holds neither the indexed content nor the incoming one is a local
// change: the sync stops with ErrLocalChanges naming it rather than overwrite it.
//
// # Commit
//
// A commit scans the cache against the index (size, mtime and mode, then SHA-256),
// uploads the content of changed files (content first: no event ever references a
// missing blob), and appends one event per touched partition. The files the index
// does not vouch for are hashed while the walk goes on, Config.Parallel at a time;
// a changed file is fsynced and its blob stored while the scan holds it open, so
// a file under 1 MiB is read once (into memory); a larger one is read twice,
// hashed and then uploaded streaming, verified against its digest on the way (a
// file changed between the reads fails the commit with ErrChecksum before the
// upload completes: nothing is published). A blob stored for a commit that is
// then not published is garbage blob GC collects. Only then are the directories
// on the changed paths synced and the events published (ledger.Publish, the one
// content-first publish: manifests stored, then the atomic append). On a chain conflict
// it reads the partitions' new events (partitionTails, the one catch-up read of a
// partition, which Conflicts and resolve use too); if none of them changes a path this host
// changed, it applies them and retries, else it stops with a *ConflictError naming
// the paths, keeping the local files (still dirty). A change of more than
// ledger.MaxBatch partitions (Config.CommitPartitions) is published as
// consecutive commits of at most that many partitions, in partition order,
// each atomic and recorded before the next; one that stops between them leaves the rest dirty for the next commit.
// A commit holds at most Config.CommitHold changed files:
// a larger change is counted per partition and published by groups of whole
// partitions of at most an eighth of that many files, each group's commit
// walking only its partitions (the write pipeline's split), so memory does not grow with the
// datastore.
//
// A commit made under locks (CommitOptions.Fences: the swamp agent's) carries
// their fences in each of its atomic batches (ledger.Fence): once another
// holder took a lock, the log refuses the commit and Commit returns the
// *ledger.LockLostError at once — no catch-up, no retry — the files kept,
// dirty. The HWM passes the commit's fence checks with it (RecordOwn).
//
// The pipeline's stages take what they act under as values: the fences
// (CommitOptions.Fences), the paths a push may publish (admit: the plan's
// path admission — a path every host can hold, of a partition an event can
// carry; the others are not synced, never published), the write endpoint
// (writeLog: the origin, whatever the log reads from), and the work done
// ahead of the push (CommitOptions.Prepared: a Prepare's, swamp's hints',
// a file unchanged since it was read is not read again).
//
// One policy (Config.Policy) bounds a push: its conflict rounds and
// settlements, and its waits; it tells a chain conflict (retried), a
// conflict over paths (settled or returned), a lost lock, a refusal and no
// answer (returned at once) apart in one place. Every operation that reaches the ledger runs
// on its ports watched (wait.go): after Policy.Report without progress it
// says what it waits for (Config.Waiting), after Policy.Wait it gives up
// with a *WaitError, whatever the stores below retry; a put whose content
// flows is never cut.
//
// # A cache's identity and stack
//
// FindCache finds the cache around a directory (the nearest with a state
// directory, as git finds its repository). A cache keeps its own host id in
// .syncledger/host-id: OpenAs makes it when the cache is first opened —
// USER@HOST (DefaultHostID), with a random suffix where the ledger already
// has a host of that name (IDConfig.Taken), so two caches are two hosts —
// and StoreHostID records it once, the first process to store one wins. A
// cache records where it is (.syncledger/host-origin.json: the machine, its
// path, its state directory's device and inode); one found on another
// machine, or at another path in another state directory (a copy, not a
// move), is another host and gets an id of its own, said once. A host runs on a ledger.Bucket
// (Config.Blobs), which the CLI opens through blobs.Open, the one way it is
// built: the retry policy and the content addressing are the Bucket's.
//
// # Sharing a cache between processes
//
// The state database's file lock is the cache's lock: one operation at a time
// across processes. Open takes it and a Host keeps it, so a short command pays
// for it once; Release gives it back, after which each operation takes it for
// its own length. Watch releases it between commits, so commands on the same
// cache (exec, commit, status) run beside it; exec keeps it while its command
// runs, so that nothing changes the cache under the command. Every write transaction
// advances the state's generation (statedb.DB.Gen); Watch, which keeps a
// session (its core's staged knowledge) between commits, opens a new one when
// another process moved the state.
//
// # Errors
//
// The errors say what went wrong and carry what a caller needs to say what to
// do next — *ConflictError and *LocalChangesError the paths, *ContentGoneError
// whether the host was behind, *NoSnapshotError the snapshots it skipped,
// ErrNoChange — and name no command line: the CLI alone turns them into its
// commands (cmd/syncledger/wayout.go). The Commands methods of the two
// conflict errors remain only for the swamp agent until it takes its ways out
// from the command.
package host

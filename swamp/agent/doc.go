// Package agent is `syncledger swamp agent`: the process that serves one
// swamp command's @syncledger/datastore extension (../extension/syncledger.ts).
// swamp loads the extension; the extension starts one agent per swamp
// process, on first use, and every datastore call it gets from swamp becomes
// one request to the agent. The binary so keeps the one implementation of the
// ledger protocol and its crash safety (package host).
//
// # The protocol
//
// JSON lines on the agent's stdin and stdout. A request is one object on one
// line: "id" (a number the extension picks, unique per process), "op" (the
// operation) and the operation's fields. The answer is one line
// {"id", "result"} or {"id", "error": {"kind", "message", "paths"}}, in any
// order (requests run concurrently; the cache operations one at a time). A
// line that is not JSON is answered with id 0 and an error. protocol.go
// holds one struct per operation, its request and its result; the
// extension's TypeScript types are generated from them
// (GenerateTypeScript, protocol_ts.go; `go generate ./swamp/agent` runs
// ./tsgen, which rewrites the extension's block), and
// TestProtocolTypeScript fails when the two differ.
// Protocol is the protocol's version; a change of the wire that an older
// extension cannot speak raises it.
//
//   - hello (first): the extension's protocol and repo. The extension
//     records no build, so any release's extension of this protocol is
//     accepted; another protocol is an error of kind "version" that names
//     the command to run (a newer binary, or setup to rewrite the extension).
//   - pull: a full sync of the ledger (lazy when metadataOnly), whatever
//     models swamp names: a per-model pull names only the models a command
//     locks, not those it reads (swamp-club#3193).
//   - hint: a markDirty path, sent just before swamp writes there; no answer.
//     At the next hint the previous one's files are hashed, uploaded and
//     fsynced in the background. Nothing is published from a hint.
//   - prepare, commit: swamp's two-phase push: prepare uploads the changed
//     content and publishes nothing; commit publishes what that prepare found
//     (swamp holds the model locks between the two). push does both.
//     What the scan after the pull, the hints and the prepare read is the
//     push's (host.Prepared): a file unchanged since is not read again, so
//     one push cycle reads each changed file once.
//   - hydrate: fetch one file a lazy pull left out. verify: the ledger, its
//     lineage and the blob store answer.
//   - foreign.catalogs, foreign.content: other namespaces' ledgers, read
//     only.
//   - lock.acquire, lock.release, lock.inspect, lock.forceRelease: swamp's
//     DistributedLock (Locks); cp.*: its control-plane store (Control);
//     ns.register, ns.list: namespace ownership — all on the base ledger's
//     swamp bucket (Bucket).
//   - close: at swamp's exit, publish what swamp wrote after its last push
//     (Ending).
//
// Every answered error carries a kind: "conflict" (paths: files another host
// changed too; the message names the commands that resolve it, WaysOut),
// "version", "lock-lost" (a publish under a swamp lock another holder took
// since: nothing published; the message names the lock and who took it),
// "unreachable" (NATS), "no-ledger", "permission" (the server refused this
// user an operation: the message names the subject and the role that grants
// it), or "error"; its message says what to do.
//
// # Ending
//
// At swamp's exit (Deno.exit dispatches "unload") the extension sends close
// and waits for its answer: the agent publishes what swamp wrote since its
// last push (the markDirty paths no push took, narrowed by its dirty set
// where it keeps one; a workflow run's final state is written after its last
// push), renumbering as a push does, within closeTimeout. As nothing
// asynchronous runs in "unload", close goes over two FIFOs whose directory
// the hello answer names ("close"), opened by the extension while swamp runs
// and written and read synchronously at its exit; publish false (a push of
// the command failed) publishes nothing. The extension turns a failed push or
// close into a message and a non-zero exit.
//
// The agent ends when its stdin closes (swamp exited, or died: its end of
// the pipe closes with it) or when its context ends (the command ends it
// when swamp, its parent, dies, or at SIGTERM). Requests still running are
// cancelled, and the locks it still holds are released at once: swamp
// releases its locks itself when it ends normally, so a lock held then is a
// dead swamp's. Should the agent die too (the host died as a whole), its
// locks stop being renewed and expire after their TTL. With no close before
// (no FIFOs, swamp killed), what swamp wrote since its last push is
// published then, after the locks are released.
//
// # Runs published late
//
// A pull that finds this host's unpublished data versions taken in the ledger
// by another host's runs (a push that could not reach it) moves them past the
// ledger's and publishes them (swamp.SyncRenumbered, swamp.CommitRenumbered);
// a push that meets them does the same.
//
// # Locks
//
// Locks (lock.go) live in the swamp bucket (Ports.SwampKV: a ledger.KV, the
// JetStream adapter in the product, memledger.KV in tests), one key a lock,
// taken by a create-only put, renewed every TTL/3 by an update conditioned
// on the holder's last revision, released by a delete conditioned on it; a
// lock whose last write (the bucket's time of it) is older than its TTL is
// taken over the same way. Their timing reads an injected Clock (the tests
// move one clock for the holders and the bucket, and sleep for nothing);
// renewals run under the agent's context, and every wait — for a lock, or
// for the cache while another request's operation runs — honours its
// context. A lock's value is swamp's LockInfo plus heldSince, so that a host
// waiting for it can say who holds it and since when.
//
// # Fences
//
// A lock lapses when its holder stops renewing it — a suspended laptop, a
// stopped process — while the holder, resumed, still believes it holds it.
// So every lock taken (new, or over an expired holder) has a fence record
// stored in the datastore's ledger (Ports.CommitLog, ledger.Fence) before
// the acquire is answered, and every commit the agent makes — a push, a
// commit, a pull's renumbered runs — carries the fences of all the swamp
// locks it holds then (the model locks and the global lock alike: swamp's
// per-model commitPush holds both). The ledger refuses such a commit, where
// it is written, once another holder took one of them: kind "lock-lost",
// nothing published, the files kept in the cache, uncommitted. No later
// publish of the command (close, or the agent's end) publishes them either:
// the next command pulls the other holder's run and publishes this one after
// it (Runs published late). What swamp writes after it released its locks
// (a workflow run's final state, published at close) is published under no
// lock, as before.
//
// # Ports
//
// The command hands the agent what it needs, opened on first use (Ports:
// the cache, the blob store, the swamp bucket, other namespaces' caches,
// heartbeats), the cache's running watch (Watch: package dirty by default),
// and the ways out its answers name (WaysOut: the CLI's command lines, so
// their text is decided in one place; the agent places them by meaning,
// never by position in a list). The agent keeps no trace of its own: B10
// and the tests time its requests from outside (internal/agenttrace).
//
// # Heartbeats
//
// After a pull, and after a push that published, the agent records the
// host's position (Ports.Beat: the heartbeat `sync` and `watch` record), in
// the background and coalesced, so `syncledger hosts`, the dashboard and the
// metrics show swamp hosts' real marks.
package agent

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
// extension's TypeScript types are generated from them (`go generate
// ./swamp/agent`), and TestProtocolTypeScript fails when the two differ.
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
//   - hydrate: fetch one file a lazy pull left out. verify: the ledger, its
//     lineage and the blob store answer.
//   - foreign.catalogs, foreign.content: other namespaces' ledgers, read
//     only.
//   - lock.acquire, lock.release, lock.inspect, lock.forceRelease: swamp's
//     DistributedLock (Locks); cp.*: its control-plane store (Control);
//     ns.register, ns.list: namespace ownership — all on the base ledger's
//     swamp bucket (Bucket).
//
// Every answered error carries a kind: "conflict" (paths: files another host
// changed too; the message names the commands that resolve it), "version",
// "unreachable" (NATS), "no-ledger", or "error"; its message says what to do.
//
// # Ending
//
// The agent ends when its stdin closes (swamp exited or died). Requests still
// running are cancelled; locks still held stop being renewed and expire after
// their TTL (swamp releases its locks itself when it ends normally). A push
// is the only way anything reaches the ledger: nothing is published from a
// hint or at the agent's end.
package agent

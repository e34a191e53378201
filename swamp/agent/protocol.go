package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/syncledger/syncledger/ledger"
)

//go:generate go run ./tsgen

// Protocol is the version of the agent's JSON-lines protocol. The extension
// (../extension/syncledger.ts) holds the same number and the same request and
// result types, generated from this file (GenerateTypeScript, `go generate ./swamp/agent`).
const Protocol = 1

// One struct per operation: the request's fields (besides "id" and "op") and
// its result. Fields tagged omitempty are optional on the wire; a `ts` tag
// gives the TypeScript type where Go's says less.

// HelloRequest is the extension's first request: the protocol it speaks and
// the repo it serves (for messages). The extension records no build: any
// release's extension of this protocol is accepted (an older one's "version"
// field is ignored).
type HelloRequest struct {
	Protocol int    `json:"protocol"`
	Repo     string `json:"repo,omitempty"`
}

// HelloResult accepts the extension.
type HelloResult struct {
	Version  string `json:"version"`
	Protocol int    `json:"protocol"`
	Cache    string `json:"cache"`
	// Close is the directory of the agent's close pipes, "in" and "out"
	// (absent where it has none): at swamp's exit the extension writes a
	// close request to in and reads its answer from out, synchronously.
	Close string `json:"close,omitempty"`
}

// PullRequest is swamp's pullChanged: a full sync of the ledger.
type PullRequest struct {
	MetadataOnly bool   `json:"metadataOnly,omitempty"` // lazy: fetch content on demand
	Namespace    string `json:"namespace,omitempty"`
}

// PullResult answers pull: Files is what swamp reports as pulled.
type PullResult struct {
	Files int        `json:"files"`
	HWM   ledger.Seq `json:"hwm"`
	Head  ledger.Seq `json:"head"`
	// Renumbered says, one line each, which of this host's unpublished data
	// versions the pull moved past another host's and published
	// (swamp.SyncRenumbered); the extension prints them.
	Renumbered []string `json:"renumbered,omitempty"`
	// Offline says why the ledger was not reached, when the opt-in let
	// swamp run on the cache as it is (its mark, HWM): nothing was pulled.
	Offline string `json:"offline,omitempty"`
	// Healed says, one line each, what the pull did to a cache whose ledger
	// had lost commits it applied (a server restored from an older backup):
	// what it republished, found republished, kept aside; the extension
	// prints them.
	Healed []string `json:"healed,omitempty"`
}

// PushRequest is swamp's pushChanged (push), preparePush (prepare) and
// commitPush (commit).
type PushRequest struct {
	Hints     []string `json:"hints,omitempty"` // swamp's markDirty paths
	Namespace string   `json:"namespace,omitempty"`
}

// PushResult answers push and commit.
type PushResult struct {
	Files  int    `json:"files"`
	Commit string `json:"commit,omitempty"` // the last commit published
	// Commits lists every commit published: more than one when the push
	// touched more partitions, or files, than one atomic commit holds
	// (host.Commit).
	Commits []string   `json:"commits,omitempty"`
	HWM     ledger.Seq `json:"hwm"`
	Hints   int        `json:"hints"` // markDirty paths the extension sent
	// Offline says why the ledger was not reached: with the opt-in, nothing
	// was published and swamp's changes stay in the cache for the next
	// command that reaches it; in the close's answer after a command that
	// wrote nothing, that what swamp read was the cache at HWM, maybe stale.
	Offline string `json:"offline,omitempty"`
}

// PrepareResult answers prepare: the changed files found, their content
// uploaded; nothing published.
type PrepareResult struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// HintRequest is a markDirty path, sent as swamp writes; it gets no answer.
type HintRequest struct {
	Hints []string `json:"hints,omitempty"`
}

// HydrateRequest is swamp's hydrateFile: fetch one lazily left file.
type HydrateRequest struct {
	Path      string `json:"path"`
	Namespace string `json:"namespace,omitempty"`
}

// VerifyRequest is swamp's verifier: does the ledger answer?
type VerifyRequest struct {
	Namespace string `json:"namespace,omitempty"`
}

// VerifyResult answers verify: the stream answers, the lineage is this
// cache's, the blob store answers.
type VerifyResult struct {
	Head   ledger.Seq `json:"head"`
	HWM    ledger.Seq `json:"hwm"`
	Ledger string     `json:"ledger"`
	UUID   string     `json:"uuid"`
	Cache  string     `json:"cache"`
	Dirty  int        `json:"dirty"`
	Files  int        `json:"files"`
	// Forked, when set, says the ledger lost commits this host applied (a
	// server restored from an older backup): head and hwm say nothing then;
	// the next pull republishes them.
	Forked string `json:"forked,omitempty"`
}

// ForeignCatalogsRequest is swamp's pullForeignCatalogs.
type ForeignCatalogsRequest struct {
	Namespaces []string `json:"namespaces"`
}

// ForeignCatalog is one foreign namespace's catalog export, as swamp's
// pullForeignCatalogs returns it: the rows of NS/.catalog-export.json.
type ForeignCatalog struct {
	Namespace string          `json:"namespace"`
	Rows      json.RawMessage `json:"rows" ts:"Record<string, unknown>[]"`
}

// ForeignContentRequest is swamp's fetchForeignContent: one file of another
// namespace's ledger; the result is its content (base64), or null.
type ForeignContentRequest struct {
	Namespace string `json:"namespace"`
	Path      string `json:"path"`
}

// LockHolder is who asks for a lock (swamp's LockInfo without the times,
// which the agent sets).
type LockHolder struct {
	Holder   string `json:"holder"`
	Hostname string `json:"hostname"`
	PID      int    `json:"pid"`
	Nonce    string `json:"nonce,omitempty"`
}

// LockAcquireRequest is swamp's DistributedLock.acquire.
type LockAcquireRequest struct {
	Key       string     `json:"key"`
	Holder    LockHolder `json:"holder"`
	TTLMs     int64      `json:"ttlMs,omitempty"`
	RetryMs   int64      `json:"retryMs,omitempty"`
	MaxWaitMs int64      `json:"maxWaitMs,omitempty"`
}

// LockKeyRequest names one lock (lock.release, lock.inspect).
type LockKeyRequest struct {
	Key string `json:"key"`
}

// LockForceReleaseRequest is swamp's forceRelease: only the holder whose
// nonce it names is removed.
type LockForceReleaseRequest struct {
	Key   string `json:"key"`
	Nonce string `json:"nonce"`
}

// ControlPutRequest is the control-plane store's put and putIfAbsent.
type ControlPutRequest struct {
	Key  string `json:"key"`
	Data []byte `json:"data"`
}

// ControlKeyRequest is the control-plane store's get and delete.
type ControlKeyRequest struct {
	Key string `json:"key"`
}

// ControlListRequest is the control-plane store's list.
type ControlListRequest struct {
	Prefix string `json:"prefix"`
}

// NamespaceRegisterRequest is swamp's registerNamespace.
type NamespaceRegisterRequest struct {
	Namespace string `json:"namespace"`
	RepoID    string `json:"repoId"`
}

// NamespaceListRequest is swamp's listNamespaces.
type NamespaceListRequest struct{}

// Request is what every request line holds besides its operation's fields.
type Request struct {
	ID int64  `json:"id"`
	Op string `json:"op"`
}

// Response answers one request: its id, and its result or its error.
type Response struct {
	ID     int64    `json:"id"`
	Result any      `json:"result,omitempty" ts:"unknown"`
	Error  *Failure `json:"error,omitempty"`
}

// Failure is a failed request: Message says what to do; Paths names the files
// concerned. Kind "lock-lost": a publish under a swamp lock another holder
// took since (ledger.ErrLockLost): nothing was published, and nothing of the
// command will be (an older extension shows it as any error).
type Failure struct {
	Kind    string   `json:"kind" ts:"\"conflict\" | \"version\" | \"unreachable\" | \"no-ledger\" | \"permission\" | \"lock-lost\" | \"error\""`
	Message string   `json:"message"`
	Paths   []string `json:"paths,omitempty"`
}

// operation is one entry of the protocol: its name, its request and result
// types, and what the agent does with it.
type operation struct {
	name     string
	req, res reflect.Type // res nil: a notification, never answered
	run      func(a *Agent, ctx context.Context, line []byte) (any, error)
}

func op[Req, Res any](name string, run func(*Agent, context.Context, Req) (Res, error)) operation {
	return operation{name: name, req: reflect.TypeFor[Req](), res: reflect.TypeFor[Res](),
		run: func(a *Agent, ctx context.Context, line []byte) (any, error) {
			var req Req
			if err := json.Unmarshal(line, &req); err != nil {
				return nil, fmt.Errorf("bad %s request: %w", name, err)
			}
			return run(a, ctx, req)
		}}
}

// operations is the protocol. The extension's types are generated from it.
var operations = []operation{
	op("hello", (*Agent).hello),
	{name: "hint", req: reflect.TypeFor[HintRequest]()}, // Serve takes it in order
	op("pull", (*Agent).pull),
	op("prepare", (*Agent).prepare),
	op("push", (*Agent).push),
	op("commit", (*Agent).commit),
	op("hydrate", (*Agent).hydrate),
	op("verify", (*Agent).verify),
	op("foreign.catalogs", (*Agent).foreignCatalogs),
	op("foreign.content", (*Agent).foreignContent),
	op("lock.acquire", (*Agent).lockAcquire),
	op("lock.release", (*Agent).lockRelease),
	op("lock.inspect", (*Agent).lockInspect),
	op("lock.forceRelease", (*Agent).lockForceRelease),
	op("cp.put", (*Agent).controlPut),
	op("cp.get", (*Agent).controlGet),
	op("cp.delete", (*Agent).controlDelete),
	op("cp.list", (*Agent).controlList),
	op("cp.putIfAbsent", (*Agent).controlPutIfAbsent),
	op("ns.register", (*Agent).namespaceRegister),
	op("ns.list", (*Agent).namespaceList),
	op("close", (*Agent).close),
}

// byName indexes operations.
var byName = func() map[string]operation {
	m := make(map[string]operation, len(operations))
	for _, o := range operations {
		m[o.name] = o
	}
	return m
}()

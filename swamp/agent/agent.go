package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

// Ports are what the agent opens, each on first use: the datastore's cache
// and ledger, its blob store, the swamp bucket, other namespaces' ledgers.
type Ports interface {
	// Host opens the datastore's cache on its ledger.
	Host(ctx context.Context) (*host.Host, error)
	// Blobs opens the ledger's blob store (verify checks it answers).
	Blobs(ctx context.Context) (*ledger.Bucket, error)
	// SwampKV opens the swamp bucket (Bucket) of the datastore's ledger (for
	// a namespace, the base ledger's: see swamp.NamespaceLedger).
	SwampKV(ctx context.Context) (ledger.KV, error)
	// CommitLog opens the datastore's ledger's log (the one Host commits
	// to): the fence record of every lock taken goes there (Locks).
	CommitLog(ctx context.Context) (ledger.CommitLog, error)
	// Foreign opens a read-only cache of another namespace's ledger (lazy:
	// content is fetched on demand), for swamp's foreign catalogs and
	// content; ledger.ErrNotFound when that namespace has no ledger. The
	// agent never commits from it.
	Foreign(ctx context.Context, ns string) (*host.Host, error)
	// Beat records this host's position in the ledger's heartbeats (package
	// consumers/heartbeat), best effort: a failure is the port's to log.
	Beat(ctx context.Context, hwm, head ledger.Seq)
	// LocalHost opens the datastore's cache without its ledger
	// (host.OpenLocal), for when the server cannot be reached (offline.go).
	LocalHost(ctx context.Context) (*host.Host, error)
	// ServerState asks the ledger's server what it says of its disk, when a
	// write was refused for lack of space (ledger.ErrServerFull): a full
	// serve names its data directory and the space to free.
	ServerState(ctx context.Context) (ledger.ServerState, error)
}

// Watch is the cache's running `syncledger watch`, asked as a commit asks it
// (package dirty). Hints alone are never trusted.
type Watch interface {
	// ForCommit returns the paths a commit of the cache at root may limit its
	// scan to (host.CommitOptions.Changed) — the watch's dirty set plus hints,
	// swamp's markDirty paths — and the snapshot to acknowledge after it; nil
	// paths: scan the whole cache (no watch runs, or it cannot vouch).
	ForCommit(ctx context.Context, root string, hints []string) (*dirty.Snapshot, []string, error)
	// AckCommit tells the watch what a commit that succeeded covered.
	AckCommit(ctx context.Context, root string, snap *dirty.Snapshot, changed []string) error
}

// DirtyWatch is Watch on package dirty: a `syncledger watch` of the cache,
// over its socket.
type DirtyWatch struct{}

func (DirtyWatch) ForCommit(ctx context.Context, root string, hints []string) (*dirty.Snapshot, []string, error) {
	snap, changed, _, err := dirty.ForCommit(ctx, root, hints)
	return snap, changed, err
}

func (DirtyWatch) AckCommit(ctx context.Context, root string, snap *dirty.Snapshot, changed []string) error {
	return dirty.AckCommit(ctx, root, snap, changed, false)
}

// WaysOut builds the command lines the agent's answers tell swamp's user to
// run, each pointed at this cache and ledger: the command decides their text
// (the CLI's ways out), the agent only where they go in its messages.
type WaysOut interface {
	// Resolve returns the commands that settle a conflict over paths either
	// way: keep this host's version on top (mine), or take the ledger's
	// (theirs).
	Resolve(paths []string) (mine, theirs string)
	// Setup returns the command that (re)writes the datastore config and the
	// extension of the swamp repo at repo, for namespace ns ("" none).
	Setup(repo, ns string) string
	// Init returns the command that creates the ledger.
	Init() string
	// ServerFull returns what to do about a write the server refused for
	// lack of space, from what the server says of its disk (st.Full false:
	// it said nothing more).
	ServerFull(st ledger.ServerState) string
}

// Config configures an Agent.
type Config struct {
	Version string // the binary's version; hello answers with it
	Cache   string // for messages
	// Host is this host's id, as its commits and heartbeats name it: the
	// locks it takes say so (LockInfo.Host), and so do their fence records.
	// "": unknown, the locks name the machine alone.
	Host string
	// Namespace is the datastore's namespace ("" none): the cache (Host) is
	// its ledger's, and swamp's paths, NS/…, are the cache's paths under NS/.
	Namespace string
	Ports     Ports
	WaysOut   WaysOut // required
	// Watch is the cache's `syncledger watch`, if one runs (nil: DirtyWatch).
	Watch Watch
	// Offline lets swamp run on the cache when the ledger's server cannot be
	// reached (the opt-in, offline.go); false: requests that need the ledger
	// fail, as they always did.
	Offline bool
	// Clock times the locks (nil: the wall clock).
	Clock Clock
	// Logger receives the agent's warnings (nil: discarded).
	Logger *slog.Logger
}

// Agent serves one swamp process: the @syncledger/datastore extension starts
// `syncledger swamp agent` once per swamp command and sends it requests, one
// JSON object a line on stdin; each answer is one line on stdout carrying the
// request's id (the protocol: doc.go, protocol.go). Requests run
// concurrently (a lock wait does not hold up a sync); the cache operations
// run one at a time.
//
// The agent connects to the ledger and opens the cache as soon as it starts,
// while swamp is still busy with its own start, so that swamp's first calls
// find them open; a failure there is reported by the first call that needs
// them.
type Agent struct {
	cfg Config

	hostMu *semaphore.Weighted // one cache operation at a time (lockHost)
	h      *host.Host
	// known is the work done on the cache's changed files ahead of a push —
	// the scan after a pull, the hints', a prepare's — that the push takes
	// rather than do again (host.Prepared): for the agent's life, one swamp
	// command.
	known *host.Prepared
	// prepared is the last prepare's changed paths, for the commit right after
	// it (nil: no prepare since the last commit).
	prepared []string

	life   context.Context // Serve's: the agent's
	kvOnce sync.Once
	kv     ledger.KV
	kvErr  error
	locks  *Locks

	hintMu    sync.Mutex
	hintLast  []string      // the last hint's paths, not written yet when it came
	hintDone  chan struct{} // closed once the work of the hints before it is done (nil: none)
	hintSince time.Time     // a hint's work leaves out files older than this
	// hintCtx is the hints' work's context (nil: none yet), ended by
	// hintStop when a publish will not wait for it (hinted); hintHeard is
	// when that work last moved (unix ns): a file hashed, content read.
	hintCtx   context.Context
	hintStop  context.CancelFunc
	hintHeard atomic.Int64
	baseDone  chan struct{} // closed once the scan after the last pull is done (nil: none)

	// Under hostMu: the agent's own dirty set (nil: none), and the scan
	// after the last pull: the changed paths it found, and the set's snapshot
	// it followed (nil: no such scan, or it failed).
	watch    *dirty.Watcher
	base     []string
	baseSnap *dirty.Snapshot

	foreignMu sync.Mutex
	foreign   map[string]*host.Host

	// lost is the *ledger.LockLostError a publish of this command met (nil:
	// none): what swamp wrote under the lost lock is published by no later
	// request of this command, the end's included.
	lostMu sync.Mutex
	lost   error
	// unfencedOnce says once that the ledger's format holds no fences.
	unfencedOnce sync.Once

	beats beats

	// Under hintMu: the markDirty paths no publish took yet, and whether
	// swamp closed the agent (close).
	unpushed map[string]bool
	closed   bool
	pipes    *closePipes // the close pipes (nil: none)

	// Offline (offline.go): why the ledger was not reached (under offMu),
	// whether h is the cache opened without it (under hostMu), the locks
	// taken meanwhile, and the end of the open at the agent's start.
	offMu    sync.Mutex
	offline  error
	local    bool
	offLocks *offlineLocks
	openDone chan struct{}
}

// New returns an agent for cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.Ports == nil || cfg.WaysOut == nil {
		return nil, fmt.Errorf("swamp agent: no ports or ways out: %w", ledger.ErrInvalid)
	}
	if cfg.Watch == nil {
		cfg.Watch = DirtyWatch{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, hostMu: semaphore.NewWeighted(1), known: host.NewPrepared(), offLocks: newOfflineLocks(cfg.Cache), openDone: make(chan struct{})}, nil
}

// lockHost takes the cache for one operation, waiting while another runs,
// until ctx ends; unlockHost gives it back.
func (a *Agent) lockHost(ctx context.Context) error {
	if err := a.hostMu.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("wait for this cache's other operation: %w", context.Cause(ctx))
	}
	return nil
}

func (a *Agent) unlockHost() { a.hostMu.Release(1) }

// Serve answers requests from r on w until r ends (swamp exited, or died:
// its end of the pipe closed) or ctx is done (the agent's owner is gone).
// Requests still running then are cancelled, and the locks this agent still
// holds are released at once: swamp releases its locks itself when it ends
// normally, so a lock held now is a dead swamp's. (Should the agent die too,
// its locks expire after their TTL.)
func (a *Agent) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	// swamp awaits every call before it exits: a request still running when
	// its input ends (swamp killed) is abandoned, a lock wait first.
	end := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.life = ctx
	var (
		wmu sync.Mutex
		wg  sync.WaitGroup
		enc = json.NewEncoder(w)
	)
	reply := func(resp Response) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = enc.Encode(resp)
	}
	// The hints are swamp's writes of this command: older files are not theirs
	// (a data directory holds every version), with some slack for the coarse
	// clock of file times.
	a.hintSince = time.Now().Add(-100 * time.Millisecond)
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.open(ctx)
	}()
	// The lines, read apart so that the end of ctx ends Serve while a read
	// blocks.
	lines := make(chan []byte)
	var readErr error // set before lines closes
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()): // the scanner reuses its buffer
			case <-ctx.Done():
				return
			}
		}
		readErr = sc.Err()
	}()
	for line := range chanUntil(ctx, lines) {
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			reply(Response{Error: &Failure{Kind: "error", Message: "bad request: " + err.Error()}})
			continue
		}
		o, ok := byName[req.Op]
		if ok && o.run == nil { // hint
			// Taken here, before the next request is read: a push sent after
			// it waits for its work.
			var h HintRequest
			if json.Unmarshal(line, &h) == nil {
				a.hint(ctx, a.own(h.Hints))
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				res any
				err = fmt.Errorf("unknown request %q", req.Op)
			)
			if ok {
				res, err = o.run(a, ctx, line)
			}
			if err != nil && ctx.Err() != nil && context.Cause(ctx) != context.Canceled {
				err = context.Cause(ctx) // why the agent is ending: say that
			}
			if err != nil {
				err = a.withServerState(ctx, err)
			}
			resp := Response{ID: req.ID, Result: res}
			if err != nil {
				resp.Result, resp.Error = nil, a.describe(err)
			}
			reply(resp)
		}()
	}
	stopped := ctx.Err() != nil
	cancel()
	wg.Wait()
	a.hinted()
	a.scanned()
	if a.locks != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(end), releaseTimeout)
		_ = a.locks.ReleaseAll(rctx) // what fails expires after its TTL
		rcancel()
		a.locks.Close()
	}
	a.hintMu.Lock()
	closed := a.closed
	a.hintMu.Unlock()
	if !closed {
		// swamp ended without a close (an extension without close pipes, or
		// swamp killed): what it wrote since its last push is published now,
		// after its locks are free (a run of the same model meanwhile is
		// renumbered past, as a push does).
		_, _ = a.publishUnpushed(context.WithoutCancel(end))
	}
	if a.pipes != nil {
		a.pipes.Close()
	}
	if a.watch != nil {
		a.watch.Close()
	}
	a.offLocks.releaseAll()
	a.beats.wait()
	if stopped {
		return nil
	}
	return readErr
}

// releaseTimeout bounds the release of a gone swamp's locks.
const releaseTimeout = 5 * time.Second

// chanUntil yields what c yields until c closes or ctx is done.
func chanUntil[T any](ctx context.Context, c <-chan T) func(func(T) bool) {
	return func(yield func(T) bool) {
		for {
			select {
			case <-ctx.Done():
				return
			case v, ok := <-c:
				if !ok || !yield(v) {
					return
				}
			}
		}
	}
}

func (a *Agent) hello(ctx context.Context, req HelloRequest) (HelloResult, error) {
	if err := checkProtocol(req.Protocol, req.Repo, a.cfg.Version); err != nil {
		return HelloResult{}, err
	}
	res := HelloResult{Version: a.cfg.Version, Protocol: Protocol, Cache: a.cfg.Cache}
	if p, err := openClosePipes(); err == nil {
		a.hintMu.Lock()
		if a.pipes == nil {
			a.pipes = p
			res.Close = p.dir
			go a.serveClose(ctx, p)
		} else {
			p.Close()
		}
		a.hintMu.Unlock()
	}
	return res, nil
}

// checkProtocol accepts an extension that speaks this binary's protocol,
// whatever release wrote it; otherwise a ProtocolError.
func checkProtocol(protocol int, repo, version string) error {
	if repo == "" {
		repo = "DIR"
	}
	if protocol == Protocol {
		return nil
	}
	return &ProtocolError{Extension: protocol, Repo: repo, Version: version}
}

// ProtocolError: the extension in Repo speaks agent protocol Extension, not
// this binary's (Protocol; Version is the binary's).
type ProtocolError struct {
	Extension int
	Repo      string
	Version   string
}

func (e *ProtocolError) Error() string {
	rel := "older"
	if e.Extension > Protocol {
		rel = "newer"
	}
	return fmt.Sprintf("the @syncledger/datastore extension in %s speaks agent protocol %d, %s than this syncledger binary's (%s: protocol %d)",
		e.Repo, e.Extension, rel, e.Version, Protocol)
}

// NamespaceError: swamp's datastore namespace (Swamp) is not the one this
// datastore's syncledger config is for (Config).
type NamespaceError struct{ Swamp, Config string }

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("swamp's datastore namespace is %q, but this datastore's syncledger config is for %q", e.Swamp, e.Config)
}

// withServerState returns err with what the server says of its disk when err
// is a write it refused for lack of space that does not say so yet (a blob
// put's, a lock's): one question, bounded.
func (a *Agent) withServerState(ctx context.Context, err error) error {
	var full *ledger.ServerFullError
	if !errors.As(err, &full) || full.State.Full || ctx.Err() != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, serverStateWait)
	defer cancel()
	st, serr := a.cfg.Ports.ServerState(ctx)
	if serr != nil {
		return err
	}
	return ledger.WithServerState(err, st)
}

// serverStateWait bounds withServerState's question.
const serverStateWait = 3 * time.Second

// describe turns err into the answer's error, with what to do about it.
func (a *Agent) describe(err error) *Failure {
	var (
		ce   *host.ConflictError
		le   *host.LocalChangesError
		ll   *ledger.LockLostError
		pe   *ProtocolError
		ne   *NamespaceError
		full *ledger.ServerFullError
		ns   *host.NoSpaceError
		we   *host.WaitError
	)
	switch {
	case errors.As(err, &pe) && pe.Extension > Protocol:
		return &Failure{Kind: "version", Message: fmt.Sprintf("%v: install a newer syncledger on this host (one that speaks protocol %d); or, to take every host back to this binary's protocol, "+
			"run '%s' with this binary and commit the extension it writes", pe, pe.Extension, a.cfg.WaysOut.Setup(pe.Repo, ""))}
	case errors.As(err, &pe):
		return &Failure{Kind: "version", Message: fmt.Sprintf("%v: run '%s' with this binary to rewrite the extension, and commit it for the other hosts",
			pe, a.cfg.WaysOut.Setup(pe.Repo, ""))}
	case errors.As(err, &ne):
		return &Failure{Kind: "error", Message: fmt.Sprintf("syncledger: %v: run '%s' (it rewrites the config)", err, a.cfg.WaysOut.Setup("DIR", ne.Swamp))}
	case errors.As(err, &ce):
		mine, theirs := a.cfg.WaysOut.Resolve(ce.Paths)
		return &Failure{Kind: "conflict", Paths: ce.Paths, Message: fmt.Sprintf(
			"syncledger: another host changed %s too; this host's files are kept, uncommitted. Keep this host's version: %s; or the other host's: %s",
			strings.Join(ce.Paths, ", "), mine, theirs)}
	case errors.As(err, &ll):
		by, what := "another holder", "nothing of this command was published"
		if ll.Taker != nil {
			by = ll.Taker.String()
		}
		var pc *host.PartialCommitError
		if errors.As(err, &pc) && len(pc.Published) > 0 {
			what = fmt.Sprintf("the ledger refused this command's commit; %d commits of the same change before it were published while the lock held, the rest was not", len(pc.Published))
		}
		return &Failure{Kind: "lock-lost", Message: fmt.Sprintf(
			"syncledger: swamp's lock %s was lost: %s took it after this host held it past its TTL without renewing it "+
				"(a suspended or stopped machine, a network cut), so that host may have run the same model meanwhile; %s (%v)",
			ll.Lock, by, what, ledger.ErrLockLost)}
	case errors.As(err, &le):
		mine, theirs := a.cfg.WaysOut.Resolve(le.Paths)
		return &Failure{Kind: "conflict", Paths: le.Paths, Message: fmt.Sprintf(
			"syncledger: files changed here, not pushed, that the ledger changed too: %s. Keep this host's version: %s; or the ledger's: %s",
			strings.Join(le.Paths, ", "), mine, theirs)}
	case errors.Is(err, ledger.ErrPermission):
		return &Failure{Kind: "permission", Message: "syncledger: " + err.Error()}
	case errors.As(err, &full):
		return &Failure{Kind: "error", Message: fmt.Sprintf("syncledger: %v: %s", err, a.cfg.WaysOut.ServerFull(full.State))}
	case errors.As(err, &ns):
		return &Failure{Kind: "error", Message: fmt.Sprintf("syncledger: %v: free space on this host's disk, then run swamp again (what was pulled is kept)", err)}
	case errors.Is(err, ledger.ErrNotFound):
		return &Failure{Kind: "no-ledger", Message: fmt.Sprintf("syncledger: %v (create the ledger with '%s', or fix \"ledger\" in the datastore config of .swamp.yaml)", err, a.cfg.WaysOut.Init())}
	case errors.As(err, &we):
		return &Failure{Kind: "unreachable", Message: fmt.Sprintf("syncledger: %v: %s, for the next swamp command (or 'swamp datastore sync'); "+
			"see that %s is up and reachable from this host (a network cut, a proxy or an endpoint that hangs)", err, we.Left(), we.Server())}
	case errors.Is(err, ledger.ErrUnreachable):
		return &Failure{Kind: "unreachable", Message: "syncledger: cannot reach NATS: " + err.Error() + " (the server is \"nats\" in the datastore config of .swamp.yaml)"}
	}
	return &Failure{Kind: "error", Message: "syncledger: " + err.Error()}
}

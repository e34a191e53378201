package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
	"github.com/syncledger/syncledger/swamp/agent"
)

func newSwampAgentCmd(a *app) *cobra.Command {
	var (
		ns        string
		offlineOK bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve one swamp process's @syncledger/datastore extension (started by the extension)",
		Long: `The @syncledger/datastore extension starts one agent per swamp command and
talks to it in JSON lines on stdin/stdout (swamp/agent): syncs, commits,
locks, the control-plane store. It ends when its stdin closes (swamp exited
or died), when its parent process dies, or at SIGTERM, and then releases the
locks it still holds (a dead swamp's). SIGINT is swamp's to handle: swamp
releases its locks through the agent, then exits. After a pull or a push it
records the host's position in the ledger's heartbeats, as sync does. At
swamp's exit it publishes what swamp wrote after its last push (the close
request, over FIFOs its hello names), or at its own end if no close came.

With --namespace NS, --ledger names the datastore's base ledger (its swamp
bucket holds the locks, the control plane and the namespace registry), the
cache is --cache/NS and its ledger is the namespace's (swamp.NamespaceLedger).
Other namespaces are read, read only, through caches in the cache's state
directory (.syncledger/foreign/NS).

With --offline-ok (the datastore's "offline": true), swamp runs on the cache
when the server cannot be reached: pulls pull nothing, locks are this host's
alone, pushes publish nothing and say so; the next swamp command that reaches
the server publishes what swamp wrote (docs/swamp.md, "Offline").`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := a.swampLife(cmd.Context())
			defer stop()
			dir, err := a.cacheDir() // --cache, else the cache around the working directory
			if err != nil {
				return err
			}
			cache, _ := filepath.Abs(dir)
			base := a.ledgerName
			if ns != "" {
				if a.ledgerName, err = swamp.NamespaceLedger(base, ns); err != nil {
					return err
				}
				cache = filepath.Join(cache, ns)
			}
			a.cache = cache
			cfg := agent.Config{
				Namespace: ns,
				Version:   versionString(),
				Cache:     cache,
				Host:      a.knownHostID(cache),
				Offline:   offlineOK,
				// Other namespaces' caches open from a copy of the configuration
				// taken now, before the agent's goroutines use a.
				Ports:   swampPorts{app: a, base: base, proto: a.sibling(base, ""), cache: cache},
				WaysOut: swampWaysOut{globals: fmt.Sprintf("--nats %s --ledger %s --cache %s", redactURL(a.natsURL), a.ledgerName, cache)},
				Logger:  a.logger,
			}
			ag, err := agent.New(cfg)
			if err != nil {
				return err
			}
			return ag.Serve(ctx, cmd.InOrStdin(), a.rawStdout) // values swamp stores: byte for byte
		},
	}
	cmd.Flags().StringVar(&ns, "namespace", "", "the datastore's namespace (see above)")
	cmd.Flags().BoolVar(&offlineOK, "offline-ok", false, "when the server cannot be reached, let swamp run on the cache and publish at the next command that reaches it")
	a.bindEnv(cmd.Flags(), "offline-ok", "SYNCLEDGER_OFFLINE_OK")
	return cmd
}

// swampWaysOut are the ways out the agent's answers name (agent.WaysOut):
// the CLI's own command lines (errorCommands), with the global flags that
// point them at the agent's cache and ledger from anywhere.
type swampWaysOut struct{ globals string }

func (w swampWaysOut) Resolve(paths []string) (mine, theirs string) {
	c := errorCommands(&host.ConflictError{Paths: paths}) // resolve --mine, then --theirs
	return w.command(c[0]), w.command(c[1])
}

// Setup is the command line of setup, as the agent's messages have always
// named it (docs/swamp.md): without the globals.
func (swampWaysOut) Setup(repo, ns string) string {
	cmd := "syncledger swamp setup --repo " + host.ShellQuote(repo)
	if ns != "" {
		cmd += " --namespace " + host.ShellQuote(ns)
	}
	return cmd
}

// Init is the command line that creates a ledger (errorNote's).
func (swampWaysOut) Init() string { return "syncledger init" }

// ServerFull is what to do about a write the server refused for lack of
// space (errorNote's).
func (swampWaysOut) ServerFull(st ledger.ServerState) string { return serverFullNote(st) }

// command is the command line cmd ("syncledger …") with the globals.
func (w swampWaysOut) command(cmd string) string {
	rest, ok := strings.CutPrefix(cmd, "syncledger ")
	if !ok {
		return cmd
	}
	return "syncledger " + w.globals + " " + rest
}

// sibling is a's configuration for another ledger and cache on the same
// NATS connection (with that ledger's own blob store).
func (a *app) sibling(ledgerName, cache string) *app {
	a.res.connMu.Lock()
	c := a.res.nats
	a.res.connMu.Unlock()
	b := *a
	b.ledgerName, b.cache, b.blobsURL = ledgerName, cache, ""
	b.host = a.hostName()
	b.res = &opened{nats: c} // its own log and blobs; the process's end closes them
	return &b
}

// swampPorts are the agent's ports (agent.Ports) on the app's ledger.
type swampPorts struct {
	*app
	base  string // the base ledger: its swamp bucket, its namespaces' ledgers
	proto *app   // the configuration other namespaces' caches open from
	cache string
}

// SwampKV opens the base ledger's swamp bucket. An operation on it the
// server refuses fails at once with ledger.ErrPermission, naming the subject
// and the role that grants it; the agent's other requests go on.
func (p swampPorts) SwampKV(ctx context.Context) (ledger.KV, error) {
	lg, err := p.ledgerOn(ctx, p.base)
	if err != nil {
		return nil, err
	}
	kv, err := lg.SwampKV(ctx)
	if err != nil {
		return nil, swampRefusal(p.base, err)
	}
	return swampKV{KV: kv, base: p.base}, nil
}

// CommitLog opens the datastore's ledger's log (the namespace's, with
// --namespace): the fence records of the locks the agent takes go there,
// where its commits go.
func (p swampPorts) CommitLog(ctx context.Context) (ledger.CommitLog, error) {
	l, err := p.app.Log(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// swampRefusal says, of a refused operation on the swamp bucket, which role
// grants it and how to get it.
func swampRefusal(base string, err error) error {
	if !errors.Is(err, ledger.ErrPermission) {
		return err
	}
	return fmt.Errorf("%w: swamp's locks and control plane (bucket %s) need the host role of ledger %s (syncledger serve --users gives a user role host; for another server, 'syncledger --ledger %s config permissions' prints the role)",
		err, agent.Bucket(base), base, base)
}

// swampKV is the swamp bucket whose refusals say so (swampRefusal).
type swampKV struct {
	ledger.KV
	base string
}

func (k swampKV) Get(ctx context.Context, key string) (ledger.KVEntry, error) {
	e, err := k.KV.Get(ctx, key)
	return e, swampRefusal(k.base, err)
}

func (k swampKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	r, err := k.KV.Put(ctx, key, value)
	return r, swampRefusal(k.base, err)
}

func (k swampKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	r, err := k.KV.Create(ctx, key, value)
	return r, swampRefusal(k.base, err)
}

func (k swampKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	r, err := k.KV.Update(ctx, key, value, last)
	return r, swampRefusal(k.base, err)
}

func (k swampKV) Delete(ctx context.Context, key string, last uint64) error {
	return swampRefusal(k.base, k.KV.Delete(ctx, key, last))
}

func (k swampKV) List(ctx context.Context, prefix string) ([]ledger.KVEntry, error) {
	es, err := k.KV.List(ctx, prefix)
	return es, swampRefusal(k.base, err)
}

// LocalHost opens the datastore's cache without its ledger, for swamp to run
// on when the server cannot be reached (agent.Config.Offline).
func (p swampPorts) LocalHost(context.Context) (*host.Host, error) {
	return p.app.LocalHost()
}

// ServerState asks the datastore's ledger's server what it says of its disk.
func (p swampPorts) ServerState(ctx context.Context) (ledger.ServerState, error) {
	lg, err := p.ledgerOn(ctx, p.ledgerName)
	if err != nil {
		return ledger.ServerState{}, err
	}
	return lg.ServerState(ctx)
}

// Beat records the host's position in the heartbeats of the datastore's ledger.
func (p swampPorts) Beat(ctx context.Context, hwm, head ledger.Seq) {
	p.beat(ctx, "swamp", hwm, head)
}

// swampParentPoll is how often the agent checks that its parent lives.
const swampParentPoll = time.Second

// errSwampGone ends an agent whose parent died.
var errSwampGone = errors.New("swamp is gone: the agent's parent process died")

// swampLife is the swamp agent's lifetime: it ends at SIGTERM, when the
// agent's parent (swamp) dies, or when a refused operation nobody watched
// ends the command (abortWith) — not at SIGINT, which is swamp's to handle.
// (Its stdin closing ends Serve too.) On Linux a dead parent's children are
// adopted, which changes their parent pid; PR_SET_PDEATHSIG would fire on the
// death of the parent's spawning thread rather than of swamp.
func (a *app) swampLife(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stopAbort := context.AfterFunc(parent, func() {
		if cause := a.aborted(); cause != nil {
			cancel(cause)
		}
	})
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ppid := os.Getppid()
	go func() {
		t := time.NewTicker(swampParentPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-term:
				cancel(errors.New("terminated (SIGTERM)"))
				return
			case <-t.C:
				if os.Getppid() != ppid {
					cancel(errSwampGone)
					return
				}
			}
		}
	}()
	return ctx, func() {
		stopAbort()
		signal.Stop(term)
		cancel(nil)
	}
}

// Foreign opens namespace ns's ledger in a cache of the cache's state
// directory (.syncledger/foreign/NS), never scanned.
func (p swampPorts) Foreign(ctx context.Context, ns string) (*host.Host, error) {
	name, err := swamp.NamespaceLedger(p.base, ns)
	if err != nil {
		return nil, err
	}
	return p.proto.sibling(name, filepath.Join(p.cache, ledger.StateDir, "foreign", ns)).Host(ctx)
}

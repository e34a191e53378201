package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	ljs "github.com/syncledger/syncledger/ledger/jetstream"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
	"github.com/syncledger/syncledger/swamp/agent"
)

// TraceEnv names a file the swamp agent appends one line per request to (its
// op and duration): the B10 benchmark reads it. Unset in normal use.
const TraceEnv = "SYNCLEDGER_SWAMP_TRACE"

func newSwampAgentCmd(a *app) *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve one swamp process's @syncledger/datastore extension (started by the extension)",
		Long: `The @syncledger/datastore extension starts one agent per swamp command and
talks to it in JSON lines on stdin/stdout (swamp/agent): syncs, commits,
locks, the control-plane store. It ends when its stdin closes. Locks it
still holds then expire after their TTL.

With --namespace NS, --ledger names the datastore's base ledger (its swamp
bucket holds the locks, the control plane and the namespace registry), the
cache is --cache/NS and its ledger is the namespace's (swamp.NamespaceLedger).
Other namespaces are read, read only, through caches in the cache's state
directory (.syncledger/foreign/NS).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
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
				a.cache = cache
			}
			cfg := agent.Config{
				Namespace: ns,
				Version:   versionString(),
				Cache:     cache,
				Globals:   fmt.Sprintf("--nats %s --ledger %s --cache %s", redactURL(a.natsURL), a.ledgerName, cache),
				// Other namespaces' caches open from a copy of the configuration
				// taken now, before the agent's goroutines use a.
				Ports: swampPorts{app: a, base: base, proto: a.sibling(base, ""), cache: cache},
				// With a watch running on the cache, its dirty set and swamp's
				// markDirty paths narrow the scan, as for commit --hint.
				Changed: func(ctx context.Context, hints []string) ([]string, func()) {
					snap, changed := a.dirtySet(ctx, cache, hints)
					return changed, func() { a.ackDirty(ctx, cache, snap, changed, false) }
				},
			}
			if tr := a.getenv(TraceEnv); tr != "" {
				f, err := os.OpenFile(tr, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
				if err != nil {
					return fmt.Errorf("%s: %w", TraceEnv, err)
				}
				defer f.Close()
				cfg.Trace = f
			}
			ag, err := agent.New(cfg)
			if err != nil {
				return err
			}
			return ag.Serve(ctx, cmd.InOrStdin(), a.stdout)
		},
	}
	cmd.Flags().StringVar(&ns, "namespace", "", "the datastore's namespace (see above)")
	return cmd
}

// sibling is a's configuration for another ledger and cache on the same
// NATS connection (with that ledger's own blob store).
func (a *app) sibling(ledgerName, cache string) *app {
	a.res.connMu.Lock()
	nc := a.res.nc
	a.res.connMu.Unlock()
	b := *a
	b.ledgerName, b.cache, b.blobsURL = ledgerName, cache, ""
	b.host = a.hostName()
	b.res = &opened{nc: nc} // its own log and blobs; the process's end closes them
	return &b
}

// swampPorts are the agent's ports (agent.Ports) on the app's ledger.
type swampPorts struct {
	*app
	base  string // the base ledger: its swamp bucket, its namespaces' ledgers
	proto *app   // the configuration other namespaces' caches open from
	cache string
}

// SwampKV opens the base ledger's swamp bucket.
func (p swampPorts) SwampKV(ctx context.Context) (jetstream.KeyValue, error) {
	nc, err := p.Conn(ctx)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return ljs.OpenKV(ctx, js, p.base, agent.Bucket(p.base), swampBucketDescription(p.base))
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

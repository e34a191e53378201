package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	ljs "github.com/syncledger/syncledger/ledger/jetstream"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
)

func newSwampSetupCmd(a *app) *cobra.Command {
	var (
		repo, ns     string
		lazy, asJSON bool
		lockTTL      int64
		binary       string
	)
	cmd := &cobra.Command{
		Use:   "setup --repo DIR [--lazy]",
		Short: "Make a swamp repo's datastore this ledger: write the @syncledger/datastore extension and configure it",
		Long: `Setup points a swamp repo (--repo, holding .swamp.yaml) at the ledger
(--nats, --ledger, credentials as usual):

  1. checks that NATS answers and the ledger exists (nothing is written if not);
  2. writes the @syncledger/datastore extension, embedded in this binary, to
     extensions/datastores/syncledger.ts (or the repo's datastoresDir);
  3. writes the datastore block of .swamp.yaml — what swamp's own
     'swamp datastore setup extension' writes, without its swamp-club login —
     naming this binary, the ledger and this host's cache (--cache; default
     DIR/.swamp/syncledger-cache), other keys kept;
  4. moves the repo's local datastore directories (.swamp/data, outputs, …)
     into the cache, commits them, and syncs the cache (metadata only for
     data/**/raw with --lazy, swamp's lazy hydration).

NATS passwords and tokens are not written into .swamp.yaml: set them in the
environment swamp runs in (SYNCLEDGER_NATS_TOKEN, …); files (--nats-creds,
--nats-nkey FILE, --nats-ca, --nats-cert, --nats-key) are referenced by path.
A repo whose datastore is @swamp/s3-datastore or @swamp/gcs-datastore moves its
data with 'syncledger swamp import' first (docs/swamp.md).`,
		Example: `  syncledger swamp setup --repo ~/infra --namespace ci
  syncledger --nats nats://10.0.0.5:4222 --ledger infra swamp setup --repo ~/infra
  syncledger swamp setup --repo . --lazy --nats-creds ~/.config/syncledger/host.creds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if repo == "" {
				return usagef("--repo: the swamp repo to set up (the directory holding .swamp.yaml)")
			}
			repo, _ = filepath.Abs(repo)
			if err := swamp.CheckRepo(repo); err != nil {
				return usagef("%v", err)
			}
			if binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary's path: %w (pass --binary)", err)
				}
				binary, _ = filepath.EvalSymlinks(exe)
			}
			binary, _ = filepath.Abs(binary)
			cache := filepath.Join(repo, ".swamp", "syncledger-cache")
			if f := lookupGlobal(a, "cache"); a.sources[f] != "" {
				cache, _ = filepath.Abs(a.cache)
			}
			// Bad input writes nothing: the server and the ledger first.
			if _, err := a.Log(ctx); err != nil {
				return err
			}
			cfg := swamp.ExtensionConfig{Binary: binary, Cache: cache, NATS: a.natsURL, Ledger: a.ledgerName, Namespace: ns, LockTTLMs: lockTTL}
			hostCache := cache // the syncledger cache: the namespace's part of swamp's
			if ns != "" {
				if err := a.setupNamespace(ctx, repo, ns); err != nil {
					return err
				}
				hostCache = filepath.Join(cache, ns)
			}
			if f := lookupGlobal(a, "host"); a.sources[f] == "flag" {
				cfg.Host = a.host
			}
			for _, p := range []struct{ name, val string }{
				{"nats-creds", a.natsAuth.creds}, {"nats-nkey", a.natsAuth.nkey}, {"nats-ca", a.natsAuth.ca},
				{"nats-cert", a.natsAuth.cert}, {"nats-key", a.natsAuth.key},
			} {
				if p.val == "" {
					continue
				}
				if p.name == "nats-nkey" && isSeed(p.val) {
					return usagef("--nats-nkey: give a file holding the seed, not the seed: .swamp.yaml is no place for it")
				}
				abs, _ := filepath.Abs(p.val)
				cfg.Flags = append(cfg.Flags, "--"+p.name, abs)
			}
			if a.natsAuth.token != "" || a.natsAuth.password != "" || a.natsAuth.user != "" {
				fmt.Fprintln(a.stderr, "note: NATS user, password and token are not written into .swamp.yaml; set SYNCLEDGER_NATS_USER/_PASSWORD/_TOKEN where swamp runs")
			}
			if err := os.MkdirAll(hostCache, 0o755); err != nil {
				return err
			}
			inst, err := swamp.Install(repo, versionString(), cfg, lazy, ns)
			if err != nil {
				return err
			}
			a.cache = hostCache
			h, err := a.Host(ctx)
			if err != nil {
				return err
			}
			cres, err := h.Commit(ctx, host.CommitOptions{Message: "swamp setup: the repo's local datastore"})
			if err != nil {
				return fmt.Errorf("commit the repo's data moved into the cache: %w", err)
			}
			a.noteSplit(cres)
			sres, err := h.Sync(ctx, host.SyncOptions{Lazy: lazy})
			if err != nil {
				return fmt.Errorf("sync the cache: %w", err)
			}
			a.beat(ctx, "swamp setup", sres.HWM, sres.Head)
			out := map[string]any{"repo": repo, "extension": inst.Extension, "config": inst.Config, "cache": hostCache, "ledger": a.ledgerName,
				"moved": inst.Moved, "committed": cres.Written + cres.Deleted, "pulled": sres.Written + sres.Deleted,
				"hwm": sres.HWM, "head": sres.Head, "swampCommand": swamp.SetupCommand(cfg, lazy, ns)}
			return a.report(asJSON, out, nil, func() {
				fmt.Fprintf(a.stdout, "wrote %s\nset the datastore of %s to %s (cache %s, ledger %s)\n", inst.Extension, inst.Config, swamp.ExtensionType, hostCache, a.ledgerName)
				if len(inst.Moved) > 0 {
					fmt.Fprintf(a.stdout, "moved .swamp/%v into the cache; committed %d files\n", inst.Moved, cres.Written+cres.Deleted)
				}
				fmt.Fprintf(a.stdout, "synced: pulled %d files; hwm %d, head %d\n", sres.Written+sres.Deleted, sres.HWM, sres.Head)
				fmt.Fprintf(a.stdout, "(swamp's own equivalent, which needs a swamp-club login:\n  %s)\n", swamp.SetupCommand(cfg, lazy, ns))
			})
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the swamp repo (directory holding .swamp.yaml)")
	cmd.Flags().StringVar(&ns, "namespace", "", "a namespace of the datastore: a ledger of its own, LEDGER_NS (created if absent, its blobs under the ledger's store's ns-NS/), read only by the other namespaces; the first repo to set a namespace up owns it")
	cmd.Flags().BoolVar(&lazy, "lazy", false, "lazy hydration: data/**/raw content is fetched when swamp reads it")
	cmd.Flags().Int64Var(&lockTTL, "lock-ttl-ms", 0, "TTL of swamp's locks in ms (default 30000): a holder that dies loses its lock this long after its last renewal")
	cmd.Flags().StringVar(&binary, "binary", "", "the syncledger binary the extension runs (default: this one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// setupNamespace registers namespace ns for the repo in the base ledger's
// swamp bucket (the first repo wins), creates the namespace's ledger if absent
// (swamp.NamespaceLedger, its blobs under the base store's swamp.NamespaceBlobs)
// and makes it a's ledger.
func (a *app) setupNamespace(ctx context.Context, repo, ns string) error {
	name, err := swamp.NamespaceLedger(a.ledgerName, ns)
	if err != nil {
		return usagef("--namespace: %v", err)
	}
	if err := a.registerNamespace(ctx, repo, ns); err != nil {
		return err
	}
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	info, err := l.Info(ctx)
	if err != nil {
		return err
	}
	baseBlobs, err := a.BlobsURL(ctx)
	if err != nil {
		return err
	}
	blobsURL, err := swamp.NamespaceBlobs(baseBlobs, ns)
	if err != nil {
		return err
	}
	a.ledgerName, a.blobsURL = name, ""
	a.res = &opened{nc: a.res.nc, closes: a.res.closes, host: a.res.host} // the namespace's own log and blobs
	nsInfo, created, err := createLedger(ctx, a, ljs.Config{Name: name, Blobs: blobsURL, Replicas: info.Replicas})
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(a.stderr, "created ledger %s for namespace %s (blobs %s)\n", name, ns, redactURL(nsInfo.Blobs))
		a.protectBlobs(ctx, nsInfo.Blobs)
	}
	return nil
}

// registerNamespace records that the repo owns namespace ns in the ledger's
// swamp bucket (swamp.RegisterNamespace: the first repo wins).
func (a *app) registerNamespace(ctx context.Context, repo, ns string) error {
	id, err := swamp.RepoID(repo)
	if err != nil {
		return err
	}
	nc, err := a.Conn(ctx)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	kv, err := ljs.OpenKV(ctx, js, a.ledgerName, swamp.Bucket(a.ledgerName), swampBucketDescription(a.ledgerName))
	if err != nil {
		return err
	}
	return swamp.RegisterNamespace(ctx, kv, ns, id)
}

func swampBucketDescription(ledgerName string) string {
	return "syncledger swamp locks and control plane of ledger " + ledgerName
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
	"github.com/syncledger/syncledger/swamp/agent"
)

func newSwampSetupCmd(a *app) *cobra.Command {
	var (
		repo, ns                 string
		lazy, asJSON, skipImport bool
		offlineOK                bool
		lockTTL                  int64
		binary                   string
	)
	cmd := &cobra.Command{
		Use:   "setup --repo DIR [--lazy]",
		Short: "Make a swamp repo's datastore this ledger: import its data, write the @syncledger/datastore extension and configure it",
		Long: `Setup points a swamp repo (--repo, holding .swamp.yaml) at the ledger
(--nats, --ledger, credentials as usual):

  1. checks that NATS answers and the ledger exists (nothing is written if not);
  2. imports the data of the repo's current datastore into the ledger, as
     'syncledger swamp import --repo DIR' does: the local .swamp/ datastore,
     a filesystem datastore anywhere (its data directories), an
     @swamp/s3-datastore or @swamp/gcs-datastore (credentials from the
     environment). If the import cannot finish, setup changes nothing in the
     repo and prints the command to finish it; --skip-import leaves the data
     where it is. The old datastore is not changed;
  3. writes the @syncledger/datastore extension, embedded in this binary, to
     extensions/datastores/syncledger.ts (or the repo's datastoresDir);
  4. writes the datastore block of .swamp.yaml — what swamp's own
     'swamp datastore setup extension' writes, without its swamp-club login —
     naming the server and the ledger, other keys kept;
  5. syncs this host's cache (REPO/.swamp/syncledger-cache, or --cache; data/**/raw
     as metadata only with --lazy, swamp's lazy hydration).

The extension and the datastore block are the same on every host: commit them.
What differs between hosts stays out of git, in REPO/.swamp/syncledger-host.json
(.swamp/ is swamp's per-host directory): --binary, or this binary when
'syncledger' on PATH is another; --cache; --host; --offline-ok; --nats-creds,
--nats-nkey FILE, --nats-ca, --nats-cert, --nats-key given on the command line.
The extension runs 'syncledger' from PATH (or $SYNCLEDGER_BINARY) otherwise.

--offline-ok lets swamp run on this host's cache when the server cannot be
reached (a laptop on a train): its changes stay in the cache and the next
swamp command that reaches the server publishes them (docs/swamp.md,
"Offline"). Without it, swamp commands that pull fail while the server is
away; reads of the cache work either way.

Setup writes no NATS user, password or token anywhere: swamp's agent reads them
as every syncledger command does, from SYNCLEDGER_NATS_USER/_PASSWORD/_TOKEN in
the environment swamp runs in or from the user's configuration file
(~/.config/syncledger/config.yaml). A NATS URL with a user or password, or
--nats-user/--nats-password/--nats-token on the command line, is refused.`,
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
			cur, err := swamp.ReadDatastore(repo)
			if err != nil && !skipImport {
				return usagef("%v: move its data yourself, or run setup with --skip-import to leave it where it is", err)
			}
			hc, err := a.swampHostConfig(binary, offlineOK)
			if err != nil {
				return err
			}
			// Bad input writes nothing: the server and the ledger first.
			if _, err := a.Log(ctx); err != nil {
				return err
			}
			cfg := swamp.ExtensionConfig{NATS: a.natsURL, Ledger: a.ledgerName, Namespace: ns, LockTTLMs: lockTTL}
			cache := swamp.DefaultCache(repo)
			if hc.Cache != "" {
				cache = hc.Cache
			}
			hostCache := cache // the syncledger cache: the namespace's part of swamp's
			if ns != "" {
				if err := a.setupNamespace(ctx, repo, ns); err != nil {
					return err
				}
				hostCache = filepath.Join(cache, ns)
			}
			var imported *swamp.ImportSummary
			if !skipImport && cur.Source != "" {
				sum, err := a.swampImport(ctx, cur.Source, cur.Namespace, cur.Dirs, swamp.ImportConfig{})
				switch {
				case err != nil && errors.Is(err, ledger.ErrNotFound) && sum.Files == 0 && cur.Dirs:
					// A filesystem datastore without data: nothing to import.
				case err != nil || !sum.Complete():
					if sum.Partitions > 0 {
						printImportSummary(a, sum)
					}
					if err == nil {
						err = errors.New("some files were not imported (see the summary)")
					}
					return withExitCode(exitSwampFindings, fmt.Errorf("import the data of the repo's datastore (%s %s): %w\n"+
						"Nothing in %s was changed. Finish the import with\n  %s\nthen run setup again; or run setup with --skip-import to leave that data where it is",
						cur.Type, redactURL(cur.Source), err, repo, a.swampCommandLine("swamp import --repo "+host.ShellQuote(repo))))
				default:
					imported = &sum
				}
			}
			if err := os.MkdirAll(hostCache, 0o755); err != nil {
				return err
			}
			inst, err := swamp.Install(repo, cfg, hc, lazy)
			if err != nil {
				return err
			}
			a.cache = hostCache
			h, err := a.Host(ctx)
			if err != nil {
				return err
			}
			cres, err := h.Commit(ctx, host.CommitOptions{Message: "swamp setup"})
			if err != nil {
				return fmt.Errorf("commit the cache's changes: %w", err)
			}
			a.noteSplit(cres)
			sres, err := h.Sync(ctx, host.SyncOptions{Lazy: lazy})
			if err != nil {
				return fmt.Errorf("sync the cache: %w", err)
			}
			a.beat(ctx, "swamp setup", sres.HWM, sres.Head)
			out := map[string]any{"repo": repo, "extension": inst.Extension, "config": inst.Config, "hostFile": inst.HostFile,
				"cache": hostCache, "host": a.hostName(), "ledger": a.ledgerName, "previous": cur.Type, "committed": cres.Written + cres.Deleted,
				"pulled": sres.Written + sres.Deleted, "hwm": sres.HWM, "head": sres.Head, "swampCommand": swamp.SetupCommand(cfg, lazy)}
			if imported != nil {
				out["imported"] = imported
			}
			return a.report(asJSON, out, nil, func() {
				if imported != nil {
					fmt.Fprintf(a.stdout, "imported the %s datastore %s: %d files, %d partitions committed, %d already in the ledger\n",
						cur.Type, redactURL(cur.Source), imported.Files, imported.Committed, imported.Unchanged)
				}
				fmt.Fprintf(a.stdout, "wrote %s\nset the datastore of %s to %s (ledger %s): commit both, they are the same on every host\n", inst.Extension, inst.Config, swamp.ExtensionType, a.ledgerName)
				if inst.HostFile != "" {
					fmt.Fprintf(a.stdout, "wrote this host's settings to %s (not for git)\n", inst.HostFile)
					if gitTracks(repo, inst.HostFile) {
						fmt.Fprintf(a.stderr, "note: git does not ignore %s: add the line .swamp/ to the repo's .gitignore (swamp repo init writes it there); it holds this host's settings\n", inst.HostFile)
					}
				}
				fmt.Fprintf(a.stdout, "synced the cache %s: pulled %d files; hwm %d, head %d\n", hostCache, sres.Written+sres.Deleted, sres.HWM, sres.Head)
				fmt.Fprintf(a.stdout, "this host is %s in the ledger's commits, heartbeats (syncledger hosts) and swamp's locks (setup --host NAME names it otherwise)\n", a.hostName())
				fmt.Fprintf(a.stdout, "(swamp's own equivalent, which needs a swamp-club login:\n  %s)\n", swamp.SetupCommand(cfg, lazy))
			})
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the swamp repo (directory holding .swamp.yaml)")
	cmd.Flags().StringVar(&ns, "namespace", "", "a namespace of the datastore: a ledger of its own, LEDGER_NS (created if absent and marked as this ledger's namespace, its blobs under the ledger's store's ns-NS/; an existing LEDGER_NS that is not this namespace's is refused), read only by the other namespaces; the first repo to set a namespace up owns it")
	cmd.Flags().BoolVar(&lazy, "lazy", false, "lazy hydration: data/**/raw content is fetched when swamp reads it")
	cmd.Flags().BoolVar(&skipImport, "skip-import", false, "do not import the data of the repo's current datastore (it stays where it is)")
	cmd.Flags().Int64Var(&lockTTL, "lock-ttl-ms", 0, "TTL of swamp's locks in ms (default 30000): a holder that dies loses its lock this long after its last renewal")
	cmd.Flags().StringVar(&binary, "binary", "", "the syncledger binary the extension runs on this host (default: syncledger on PATH)")
	cmd.Flags().BoolVar(&offlineOK, "offline-ok", false, "on this host, let swamp run on the cache when the server cannot be reached, and publish at the next command that reaches it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// swampHostConfig is this host's settings for a repo's datastore
// (swamp.HostFile): those setup was given on the command line, and this
// binary if the one on PATH is another. It refuses a NATS user, password or
// token that only the command line gives: setup writes them nowhere, and
// swamp's agent would not have them.
func (a *app) swampHostConfig(binary string, offlineOK bool) (swamp.HostConfig, error) {
	host := swamp.HostConfig{Offline: offlineOK}
	if urlHasUser(a.natsURL) {
		return host, usagef("--nats: setup writes the NATS URL into .swamp.yaml, which git tracks, and this one carries a user or password: "+
			"give the URL without them, and the user and password to swamp's agent through SYNCLEDGER_NATS_USER and SYNCLEDGER_NATS_PASSWORD "+
			"in the environment swamp runs in (or nats-user and nats-password in %s, chmod 600), then run setup again", a.userConfigPath())
	}
	for _, name := range []string{"nats-user", "nats-password", "nats-token"} {
		if a.sources[lookupGlobal(a, name)] == "flag" {
			return host, usagef("--%s: setup writes no NATS credentials, and swamp's agent does not see this command line: "+
				"set SYNCLEDGER_%s in the environment swamp runs in (or %s in %s, chmod 600) and run setup again without --%s",
				name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")), name, a.userConfigPath(), name)
		}
	}
	onPath := ""
	if p, err := exec.LookPath("syncledger"); err == nil {
		onPath, _ = filepath.EvalSymlinks(p)
	}
	if binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return host, fmt.Errorf("find this binary's path: %w (pass --binary)", err)
		}
		binary, _ = filepath.EvalSymlinks(exe)
	}
	binary, _ = filepath.Abs(binary)
	if real, err := filepath.EvalSymlinks(binary); err != nil || real != onPath {
		host.Binary = binary
	}
	if f := lookupGlobal(a, "cache"); a.sources[f] == "flag" {
		host.Cache, _ = filepath.Abs(a.cache)
	}
	if f := lookupGlobal(a, "host"); a.sources[f] == "flag" {
		host.Host = a.host
	}
	for _, p := range []struct{ name, val string }{
		{"nats-creds", a.natsAuth.creds}, {"nats-nkey", a.natsAuth.nkey}, {"nats-ca", a.natsAuth.ca},
		{"nats-cert", a.natsAuth.cert}, {"nats-key", a.natsAuth.key},
	} {
		if p.val == "" || a.sources[lookupGlobal(a, p.name)] != "flag" {
			continue
		}
		if p.name == "nats-nkey" && isSeed(p.val) {
			return host, usagef("--nats-nkey: give a file holding the seed, not the seed: setup writes no secret")
		}
		abs, _ := filepath.Abs(p.val)
		host.Flags = append(host.Flags, "--"+p.name, abs)
	}
	return host, nil
}

// gitTracks reports whether repo is a git work tree that does not ignore
// path (git check-ignore exits 1); no git, or no work tree, is false.
func gitTracks(repo, path string) bool {
	err := exec.Command("git", "-C", repo, "check-ignore", "-q", path).Run()
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 1
}

// swampCommandLine is a syncledger command line on a's server and ledger.
func (a *app) swampCommandLine(cmd string) string {
	return fmt.Sprintf("syncledger --nats %s --ledger %s %s", host.ShellQuote(redactURL(a.natsURL)), a.ledgerName, cmd)
}

// userConfigPath is the user's syncledger configuration file, for messages.
func (a *app) userConfigPath() string {
	if p, _ := a.configPath(); p != "" {
		return p
	}
	return "~/.config/syncledger/config.yaml"
}

// setupNamespace registers namespace ns for the repo in the base ledger's
// swamp bucket (the first repo wins), creates the namespace's ledger if absent
// (swamp.NamespaceLedger, its blobs under the base store's swamp.NamespaceBlobs,
// marked as ns of the base) and makes it a's ledger. An existing ledger of
// that name is taken only if it is that namespace's (swamp.CheckNamespaceLedger):
// marked so, or made before the mark by a release whose setup registered ns
// for this repo (then marked, by an admin's setup); any other is refused
// before anything is registered or written.
func (a *app) setupNamespace(ctx context.Context, repo, ns string) error {
	name, err := swamp.NamespaceLedger(a.ledgerName, ns)
	if err != nil {
		return usagef("--namespace: %v", err)
	}
	id, err := swamp.RepoID(repo)
	if err != nil {
		return err
	}
	kv, err := a.swampKV(ctx)
	if err != nil {
		return err
	}
	owner, err := agent.NamespaceOwner(ctx, kv, ns)
	if err != nil {
		return fmt.Errorf("read namespace %q's registration: %w", ns, err)
	}
	if owner != "" && owner != id {
		return agent.RegisterNamespace(ctx, kv, ns, id) // refused, saying whose it is
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
	a.res = &opened{nats: a.res.nats, closes: a.res.closes, host: a.res.host} // the namespace's own log and blobs
	nsInfo, created, err := createLedger(ctx, a, natsjs.LedgerConfig{Name: name, Blobs: blobsURL, Replicas: info.Replicas, NamespaceOf: info.UUID, Namespace: ns})
	if err != nil {
		return err
	}
	legacy := false
	if !created {
		if legacy, err = swamp.CheckNamespaceLedger(info, ns, nsInfo, owner == id); err != nil {
			return err
		}
	}
	if err := agent.RegisterNamespace(ctx, kv, ns, id); err != nil {
		return err
	}
	if created {
		fmt.Fprintf(a.stderr, "created ledger %s for namespace %s (blobs %s)\n", name, ns, redactURL(nsInfo.Blobs))
		a.protectBlobs(ctx, nsInfo.Blobs)
	}
	if legacy {
		nsLog, err := a.Log(ctx)
		if err != nil {
			return err
		}
		switch err := nsLog.MarkNamespace(ctx, info.UUID, ns); {
		case err == nil:
			fmt.Fprintf(a.stderr, "marked ledger %s as namespace %s of ledger %s (an older release made it without the mark)\n", name, ns, info.Name)
		case errors.Is(err, ledger.ErrPermission):
			fmt.Fprintf(a.stderr, "note: ledger %s, namespace %s's, carries no namespace mark (an older release made it): "+
				"recognised by %s's namespace registry; an admin's 'syncledger swamp setup --namespace %s' marks it\n", name, ns, info.Name, ns)
		default:
			return err
		}
	}
	return nil
}

// swampKV opens the swamp bucket of a's ledger (the base's, before
// setupNamespace makes the namespace's a's ledger).
func (a *app) swampKV(ctx context.Context) (ledger.KV, error) {
	lg, err := a.ledgerOn(ctx, a.ledgerName)
	if err != nil {
		return nil, err
	}
	return lg.SwampKV(ctx)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/swamp"
)

// cacheDir returns the cache directory in effect: --cache (flag, environment or
// configuration file) if given, which may make a new cache; otherwise the nearest
// directory at or above the working directory that holds a state directory, as
// git finds its repository. Outside any cache it is a usage error, before
// anything is opened: a command run in the wrong directory must not make it a
// cache nor publish its files.
func (a *app) cacheDir() (string, error) {
	if a.cache != "" {
		return a.cache, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the cache: %w", err)
	}
	// A swamp repo set up on a ledger holds its cache (.swamp/syncledger-cache):
	// run in the repo, or in that cache, a command uses it as the repo's
	// extension does. A cache nearer than the repo is that cache.
	dir, found := host.FindCache(wd)
	repo, isRepo, err := swamp.FindRepo(wd)
	if err != nil && !found {
		return "", err
	}
	if isRepo && (!found || dir == repo.Cache() || !strings.HasPrefix(dir, repo.Repo+string(filepath.Separator))) {
		return a.swampRepoCache(repo)
	}
	if found {
		a.cache = dir
		return dir, nil
	}
	return "", usagef("not in a syncledger cache (no %s/ in %s or any parent): pass --cache DIR (or set SYNCLEDGER_CACHE) to use or make the cache DIR", ledger.StateDir, wd)
}

// swampRepoCache makes the cache of the swamp repo around the working
// directory the cache in effect, as the repo's extension runs it on this
// host: its ledger, server, host id and flags where none were given (flag,
// environment or configuration file), so that 'syncledger status' in a swamp
// repo shows its datastore (issue 39). A cache setup has not made yet is a
// usage error naming setup.
func (a *app) swampRepoCache(r swamp.RepoDatastore) (string, error) {
	dir := r.Cache()
	if _, err := os.Stat(filepath.Join(dir, ledger.StateDir)); err != nil {
		return "", usagef("%s is a swamp repo on a ledger, but this host's cache of it, %s, is not made: run 'syncledger swamp setup --repo %s' (or pass --cache DIR)",
			r.Repo, dir, host.ShellQuote(r.Repo))
	}
	given := func(name string) bool { return a.sources[lookupGlobal(a, name)] != "" }
	if !given("ledger") {
		name, err := r.Ledger()
		if err != nil {
			return "", err
		}
		if err := ledger.ValidateName(name); err != nil {
			return "", fmt.Errorf("the datastore config of %s/.swamp.yaml: %w", r.Repo, err)
		}
		a.ledgerName = name
	}
	if !given("nats") && r.NATS() != "" {
		a.natsURL = r.NATS()
	}
	if !given("host") && r.Host.Host != "" {
		a.host, a.hostDefault = r.Host.Host, false
	}
	if err := a.applyHostFlags(r); err != nil {
		return "", err
	}
	a.cache = dir
	return dir, nil
}

// applyHostFlags sets the global flags of the repo's host file (its
// "flags", e.g. --nats-creds FILE) that were not given otherwise.
func (a *app) applyHostFlags(r swamp.RepoDatastore) error {
	fl := r.Host.Flags
	for i := 0; i < len(fl); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(fl[i], "-"), "=")
		f := lookupGlobal(a, name)
		if f == nil || !strings.HasPrefix(fl[i], "--") {
			return fmt.Errorf("%s: flags: %q is not a global flag of syncledger: fix it, or run 'syncledger swamp setup --repo %s' to rewrite it",
				filepath.Join(r.Repo, swamp.HostFile), fl[i], host.ShellQuote(r.Repo))
		}
		if !hasVal && f.Value.Type() != "bool" && i+1 < len(fl) {
			i++
			val = fl[i]
		} else if !hasVal {
			val = "true"
		}
		if a.sources[f] != "" {
			continue
		}
		if err := f.Value.Set(val); err != nil {
			return fmt.Errorf("%s: flags: --%s: %w", filepath.Join(r.Repo, swamp.HostFile), name, err)
		}
		a.sources[f] = "file " + filepath.Join(r.Repo, swamp.HostFile)
	}
	return a.natsAuth.check(a)
}

// Host opens this host's cache (cacheDir) bound to the ledger, on first use,
// under its host id (host.OpenAs): --host if given, else the cache's own.
func (a *app) Host(ctx context.Context) (*host.Host, error) {
	dir, err := a.cacheDir()
	if err != nil {
		return nil, err
	}
	given := ""
	if !a.hostDefault {
		given = a.host
	}
	a.hostDefault = false
	h, _, err := host.OpenAs(dir, a.idConfig(ctx, given), func(id string) (*host.Host, error) {
		a.setHost(id)
		return a.openHost(ctx)
	})
	return h, err
}

// idConfig is how Host names the cache's host (host.OpenAs): given, else
// the cache's own id; a new one (or a copied cache's) is USER@HOST, with a
// suffix where the ledger's heartbeats already hold that host; the machine
// is SYNCLEDGER_MACHINE_ID if set (machines cloned from one image share
// /etc/machine-id), else host.MachineID.
func (a *app) idConfig(ctx context.Context, given string) host.IDConfig {
	return host.IDConfig{
		Given:   given,
		Machine: a.machine(),
		Taken: func(id string) bool {
			kv, err := a.Heartbeats(ctx)
			if err != nil {
				return false
			}
			gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err = kv.Get(gctx, heartbeat.Key(id))
			return err == nil
		},
		Note: func(msg string) { fmt.Fprintf(a.stderr, "syncledger: note: %s\n", msg) },
	}
}

// machine is this machine's id (host.IDConfig.Machine).
func (a *app) machine() string {
	if m := a.getenv("SYNCLEDGER_MACHINE_ID"); m != "" {
		return m
	}
	return host.MachineID()
}

// knownHostID is the host id a command on the cache at dir will run as,
// when it is known before the cache is opened: the one given, else the
// cache's own (host.KnownID); "" when the first open decides it.
func (a *app) knownHostID(dir string) string {
	if !a.hostDefault {
		return a.host
	}
	id, _ := host.KnownID(dir, a.machine())
	return id
}

// LocalHost opens the cache without its ledger (host.OpenLocal), for status
// when the server cannot be reached. The host id is the one Host resolved.
func (a *app) LocalHost() (*host.Host, error) {
	h, err := host.OpenLocal(host.Config{Cache: a.cache, Host: a.host, Logger: a.logger})
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", a.cache, err)
	}
	a.onClose(func() { _ = h.Close() })
	return h, nil
}

func (a *app) openHost(ctx context.Context) (*host.Host, error) {
	lg, err := a.Log(ctx)
	if err != nil {
		return nil, err
	}
	bl, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	h, err := host.Open(host.Config{Cache: a.cache, Host: a.host, Log: lg, Blobs: bl, Logger: a.logger,
		Policy: host.Policy{Wait: a.wait}, Waiting: a.waiting})
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", a.cache, err)
	}
	a.onClose(func() { _ = h.Close() })
	if err := a.setFailpoint(h); err != nil {
		return nil, err
	}
	return h, nil
}

// ExistingHost is Host for the commands that only look at a cache (status,
// verify): looking must not make a directory a cache, so one without the
// state directory is a usage error naming --cache.
func (a *app) ExistingHost(ctx context.Context) (*host.Host, error) {
	if _, err := a.cacheDir(); err != nil {
		return nil, err
	}
	state := filepath.Join(a.cache, ledger.StateDir)
	if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
		dir, _ := filepath.Abs(a.cache)
		return nil, usagef("%s is not a syncledger cache (it has no %s/): pass --cache DIR, or run 'syncledger sync' there to make it one", dir, ledger.StateDir)
	}
	return a.Host(ctx)
}

// scope is the --model/--partition selection of sync, commit, exec and log.
type scope struct {
	models     []string
	partitions []string
}

func (s *scope) addFlags(fs *pflag.FlagSet, verb string) {
	fs.StringArrayVar(&s.models, "model", nil, verb+" only this model's partitions and its type's shared ones (data--TYPE, definitions-evaluated--TYPE), TYPE:ID (e.g. command/shell:vpc); repeatable")
	fs.StringArrayVar(&s.partitions, "partition", nil, verb+" only this partition key (e.g. data--aws--ec2--vpc--abc); repeatable")
}

// keys returns the selected partition keys, sorted; nil selects everything.
func (s scope) keys() ([]string, error) {
	var keys []string
	for _, m := range s.models {
		typ, id, err := parseModel(m)
		if err != nil {
			return nil, err
		}
		// A run of the model also reads and writes its type's "latest" markers
		// and evaluated definitions (ledger.TypePartitionKeys): without them a
		// scoped sync misses what a run reads from other models (issue 13).
		keys = append(keys, ledger.PartitionKeysForModel(typ, id)...)
		keys = append(keys, ledger.TypePartitionKeys(typ)...)
	}
	for _, p := range s.partitions {
		if p == "" {
			return nil, usagef("--partition: empty key")
		}
		keys = append(keys, p)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// scopedHost resolves the scope's partition keys and opens this host's cache.
func (a *app) scopedHost(ctx context.Context, s scope) ([]string, *host.Host, error) {
	parts, err := s.keys()
	if err != nil {
		return nil, nil, err
	}
	h, err := a.Host(ctx)
	return parts, h, err
}

// report prints a command's result: as JSON with --json, else for people with
// human. A failed command prints no result with --json (run prints the error
// object instead: a result beside an error would read as a success).
func (a *app) report(asJSON bool, res any, err error, human func()) error {
	if asJSON {
		if err != nil {
			return err
		}
		return a.printJSON(res)
	}
	human()
	return err
}

//go:build server

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/embedded"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// The server build (-tags server, the syncledger-server binary) runs serve in
// this process, with nats-server linked in; the default build hands serve to
// it (serve_exec.go). See BENCHMARKS.md, B11: nats-server's package inits and
// size cost every other command a third of its start-up.

// serveHandOff is the default build's hand-over to this one (serve_exec.go).
func serveHandOff(context.Context, *app, *cobra.Command, []string) error { return nil }

// runServe is serve: the embedded server, the ledger, the dashboard.
func runServe(ctx context.Context, a *app, cmd *cobra.Command, sc serveConfig, o *serveOpts) error {
	cfg := embedded.Config{Listen: sc.Listen, DataDir: sc.DataDir, Token: sc.Token, User: sc.User, Password: sc.Password,
		TLS: embedded.TLS{CertFile: sc.TLS.CertFile, KeyFile: sc.TLS.KeyFile, CAFile: sc.TLS.CAFile, Verify: sc.TLS.Verify}}
	users, err := o.users.load()
	if err != nil {
		return err
	}
	scope, err := permissionScope(a.ledgerName, a.blobsURL)
	if err != nil {
		return err
	}
	if a.blobsURL == "" {
		scope.ObjectBucket = "" // serve's default blobs are a directory
	}
	if cfg.Users, err = embeddedUsers(users, scope); err != nil {
		return err
	}
	if o.ui != "" {
		if err := checkUIAddr(o.ui, o.uiPublic, "--ui-public"); err != nil {
			return err
		}
	}
	// nats-server's own notices (its banner) only at debug level.
	cfg.Logger = a.logger
	if a.level > slog.LevelDebug {
		cfg.Logger = a.newLogger(max(a.level, slog.LevelWarn))
	}
	cfg.SyncAlways = true // an acknowledged commit survives power loss
	if cfg.Reserve, err = parseReserve(sc.Reserve); err != nil {
		return err
	}
	srv, err := embedded.Start(cfg)
	switch {
	case errors.Is(err, embedded.ErrInsecure):
		return usagef("%v: give --token, --user and --password, --users FILE, or --tls-verify with --tls-ca (env SYNCLEDGER_SERVE_TOKEN, SYNCLEDGER_SERVE_USER, SYNCLEDGER_SERVE_PASSWORD, SYNCLEDGER_SERVE_USERS), or listen on 127.0.0.1", err)
	case errors.Is(err, embedded.ErrConfig):
		return &usageError{err}
	case err != nil:
		return err
	}
	defer srv.Shutdown()

	c, err := natsjs.Open(ctx, natsjs.Config{Write: srv.Endpoint(), Name: "syncledger-serve", Logger: a.logger})
	if err != nil {
		return err
	}
	defer c.Close()
	// Commands run inside serve use the embedded server, not --nats.
	a.res.nats, a.natsURL = c, srv.ClientURL()
	defer a.close()

	blobsURL := a.blobsURL
	if blobsURL == "" {
		dir := filepath.Join(srv.DataDir(), "blobs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create blob directory: %w", err)
		}
		blobsURL = fileURL(dir)
	}
	info, created, err := createLedger(ctx, a, natsjs.LedgerConfig{Name: a.ledgerName, Blobs: blobsURL, Replicas: 1})
	if err != nil {
		return ledger.WithServerState(err, srv.Disk()) // a disk already full: what to free
	}
	// serve's own configuration: every resource of its ledger as this
	// release makes it (created with a new ledger; upgraded on an older one).
	changes, err := upgradeLedger(ctx, a, info.Name)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		if ch.Action != "" && !created {
			a.logger.Info("upgraded", "resource", ch.Resource, "action", ch.Action, "settings", ch.Settings)
		}
	}
	a.protectBlobs(ctx, info.Blobs)
	// The users' permissions name the ledger's object store bucket: the
	// ledger's own, which an existing ledger (made with --blobs before)
	// knows and this command line may not.
	if ls, err := permissionScope(info.Name, info.Blobs); err == nil && len(cfg.Users) > 0 && ls.ObjectBucket != scope.ObjectBucket {
		scope = ls
		eu, err := embeddedUsers(users, scope)
		if err == nil {
			err = srv.SetUsers(eu)
		}
		if err != nil {
			return fmt.Errorf("give the users the ledger's blob store %s: %w", redactURL(info.Blobs), err)
		}
	}
	if !created {
		if a.blobsURL != "" && info.Blobs != a.blobsURL {
			a.logger.Warn("the ledger exists with another blob store; its setting is kept",
				"ledger", info.Name, "blobs", redactURL(info.Blobs), "asked", redactURL(a.blobsURL))
		}
		if _, err := a.openBucket(ctx, info.Blobs, ledger.RetryPolicy{}); err != nil {
			a.logger.Warn("the ledger's blob store does not open here", "err", err)
		}
	}

	uiURL, uiDone := "", func() error { return nil }
	if o.ui != "" {
		d, err := a.dashboard(ctx)
		if err != nil {
			return err
		}
		if uiURL, uiDone, err = a.startUI(ctx, d, o.ui, o.uiPublic); err != nil {
			return err
		}
	}

	disk := srv.Disk()
	if o.json {
		// One line, so that a supervisor can read it as soon as it is printed.
		err = a.printJSON(serveInfo{URL: srv.ClientURL(), Data: srv.DataDir(), PID: os.Getpid(), Ledger: info.Name,
			UUID: info.UUID, Blobs: redactURL(info.Blobs), UI: uiURL, TLS: cfg.TLS.CertFile != "",
			Auth: authKind(cfg), Reserve: disk.Reserve, Free: disk.Free})
		if err != nil {
			return err
		}
	} else {
		w := a.stdout
		fmt.Fprintf(w, "syncledger serve: NATS with JetStream listening on %s\n", srv.ClientURL())
		fmt.Fprintf(w, "  data     %s (locked by pid %d)\n", srv.DataDir(), os.Getpid())
		fmt.Fprintf(w, "  ledger   %s  uuid %s  blobs %s\n", info.Name, info.UUID, redactURL(info.Blobs))
		if disk.Reserve > 0 {
			fmt.Fprintf(w, "  disk     %s free; writes refused below %s free (--reserve)\n", ledger.Bytes(disk.Free), ledger.Bytes(disk.Reserve))
		} else {
			why := "--reserve off"
			if cfg.Reserve >= 0 {
				why = "its free space is not read on this system"
			}
			fmt.Fprintf(w, "  disk     not watched (%s): a full disk stalls writes until serve restarts\n", why)
		}
		if uiURL != "" {
			fmt.Fprintf(w, "  dashboard %s\n", uiURL)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Next, in another terminal (in a source tree, `go run ./cmd/syncledger` for `syncledger`):")
		for _, line := range nextSteps(cmd.Root(), a, cfg, srv.ClientURL()) {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w, "Stop with Ctrl-C.")
	}

	// SIGHUP re-reads --users: a host whose user is gone is disconnected and
	// refused, every other connection goes on (docs/ops.md, Revoking a host).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			a.logger.Info("shutting down", "data", srv.DataDir())
			return uiDone()
		case <-hup:
			if err := reloadUsers(srv, o, scope); err != nil {
				a.logger.Error("users not reloaded: the previous ones stay", "err", err)
				continue
			}
			a.logger.Info("users reloaded", "users", o.users.String())
		}
	}
}

// reloadUsers gives the running server the users --users names now.
func reloadUsers(srv *embedded.Server, o *serveOpts, scope natsauth.Scope) error {
	if o.users.path == "" {
		return errors.New("serve was given no --users file to read again (inline users need a restart)")
	}
	users, err := o.users.load()
	if err != nil {
		return err
	}
	eu, err := embeddedUsers(users, scope)
	if err != nil {
		return err
	}
	return srv.SetUsers(eu)
}

func authKind(cfg embedded.Config) string {
	switch {
	case cfg.Token != "":
		return "token"
	case len(cfg.Users) > 0:
		return "users"
	case cfg.User != "":
		return "user"
	case cfg.TLS.Verify:
		return "client-certificates"
	}
	return "none"
}

// nextSteps lists commands to run against this server: only commands this binary
// has, with the settings that differ from the defaults exported first.
func nextSteps(root *cobra.Command, a *app, cfg embedded.Config, url string) []string {
	var out []string
	scheme, rest, _ := strings.Cut(url, "://")
	switch {
	case cfg.Token != "":
		out = append(out, "export SYNCLEDGER_NATS="+scheme+"://TOKEN@"+rest)
	case cfg.User != "" && len(cfg.Users) == 0:
		out = append(out, "export SYNCLEDGER_NATS="+scheme+"://USER:PASSWORD@"+rest)
	case url != DefaultNATS:
		out = append(out, "export SYNCLEDGER_NATS="+url)
	}
	if len(cfg.Users) > 0 {
		out = append(out, "export SYNCLEDGER_NATS_USER=USER SYNCLEDGER_NATS_PASSWORD=PASSWORD   # or SYNCLEDGER_NATS_NKEY=SEED-FILE")
	}
	if cfg.TLS.CertFile != "" {
		out = append(out, "export SYNCLEDGER_NATS_CA=CA-FILE   # the CA that signed --tls-cert")
		if cfg.TLS.Verify {
			out = append(out, "export SYNCLEDGER_NATS_CERT=CLIENT-CERT SYNCLEDGER_NATS_KEY=CLIENT-KEY")
		}
	}
	if a.ledgerName != "default" {
		out = append(out, "export SYNCLEDGER_LEDGER="+a.ledgerName)
	}
	has := func(name string) bool {
		c, _, err := root.Find([]string{name})
		return err == nil && c != root && c.Name() == name
	}
	if has("sync") {
		out = append(out, "syncledger --cache DIR sync            # bring a host's cache up to date")
	}
	if has("commit") {
		out = append(out, "syncledger --cache DIR commit -m MSG   # publish the cache's changes")
	}
	out = append(out, "syncledger log --follow                # print commits as hosts publish them")
	return out
}

// embeddedUsers turns serve's users into the embedded server's, with their
// roles' permissions on scope.
func embeddedUsers(users []serveUser, scope natsauth.Scope) ([]embedded.User, error) {
	out := make([]embedded.User, 0, len(users))
	for i, u := range users {
		role, err := natsauth.ParseRole(u.Role)
		if err != nil {
			return nil, usagef("--users: user %d: %v", i+1, err)
		}
		if len(u.Consumers) > 0 && role != natsauth.RoleTooling {
			return nil, usagef("--users: user %d: only a tooling user runs consumers (consumers: is for role tooling)", i+1)
		}
		if len(u.Hosts) > 0 && role != natsauth.RoleHost {
			return nil, usagef("--users: user %d: only a host user beats as host ids (hosts: is for role host)", i+1)
		}
		own := scope
		own.Consumers, own.Hosts = u.Consumers, u.Hosts
		perms, err := natsauth.For(role, own)
		if err != nil {
			return nil, usagef("--users: user %d: %v", i+1, err)
		}
		out = append(out, embedded.User{Name: u.User, Password: u.Password, Nkey: u.Nkey, Permissions: perms})
	}
	return out, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/embedded"
	"github.com/syncledger/syncledger/ledger/jetstream"
)

// defaultDataDir is serve's data directory when --data and SYNCLEDGER_DATA are
// unset: $XDG_DATA_HOME/syncledger, else ~/.local/share/syncledger.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "syncledger")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "syncledger")
	}
	return "syncledger-data"
}

// fileURL is the file:// URL of an absolute directory.
func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// serveOpts are serve's flags beyond embedded.Config.
type serveOpts struct {
	users    usersFlag
	ui       string
	uiPublic bool
	json     bool
}

func newServeCmd(a *app) *cobra.Command {
	var (
		cfg embedded.Config
		o   serveOpts
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the embedded default: NATS with JetStream, a blob store and the ledger",
		Long: `Run the embedded default deployment in this process: a nats-server with
JetStream storing its data under --data, and the ledger named by --ledger
(created if absent) with its blobs in DATA/blobs (or --blobs). Prints the URL
hosts connect to and what to run next, then serves until SIGINT or SIGTERM.

The data directory is locked: a second serve on it fails, naming the pid that
holds it. Listening on anything but a loopback address requires authentication:
--token, --user and --password (an unrestricted user), --users FILE (users with
the permissions of a role: admin, host or tooling; see "config permissions"),
or client certificates (--tls-verify). Clients log in with --nats-user and
--nats-password, --nats-token or --nats-nkey.

--tls-cert and --tls-key make clients connect with TLS (tls://…; clients give
--nats-ca); --tls-ca and --tls-verify also require client certificates.

--ui ADDR serves the dashboard (see "syncledger ui") from this process.
--json prints the startup information as one JSON object instead of text.`,
		Example: `  syncledger serve
  syncledger serve --listen 127.0.0.1:4333 --data /var/lib/syncledger --ui 127.0.0.1:4280
  SYNCLEDGER_SERVE_TOKEN=s3cret syncledger serve --listen 0.0.0.0:4222
  syncledger serve --listen 0.0.0.0:4222 --users users.yaml --tls-cert server.pem --tls-key server-key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), a, cmd, cfg, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", embedded.DefaultListen, "client address host:port (port 0 picks a free one)")
	fs.StringVar(&cfg.DataDir, "data", defaultDataDir(a.getenv), "data directory (JetStream store, blobs, lock)")
	fs.StringVar(&cfg.Token, "token", "", "require clients to present this token")
	fs.StringVar(&cfg.User, "user", "", "require clients to log in as this user (with --password)")
	fs.StringVar(&cfg.Password, "password", "", "the password for --user")
	fs.Var(&o.users, "users", "YAML file of users, each {user, password | nkey, role: admin|host|tooling}")
	fs.StringVar(&cfg.TLS.CertFile, "tls-cert", "", "PEM server certificate: clients must use TLS")
	fs.StringVar(&cfg.TLS.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.TLS.CAFile, "tls-ca", "", "PEM CAs that sign client certificates")
	fs.BoolVar(&cfg.TLS.Verify, "tls-verify", false, "require a client certificate signed by --tls-ca")
	fs.StringVar(&o.ui, "ui", "", "also serve the dashboard on this address, host:port (loopback unless --ui-public)")
	fs.BoolVar(&o.uiPublic, "ui-public", false, "allow --ui on a non-loopback address (the dashboard has no login)")
	fs.BoolVar(&o.json, "json", false, "print the startup information as JSON")
	a.bindEnv(fs, "listen", "SYNCLEDGER_LISTEN")
	a.bindEnv(fs, "data", "SYNCLEDGER_DATA")
	a.bindEnv(fs, "token", "SYNCLEDGER_SERVE_TOKEN")
	a.bindEnv(fs, "user", "SYNCLEDGER_SERVE_USER")
	a.bindEnv(fs, "password", "SYNCLEDGER_SERVE_PASSWORD")
	a.bindEnv(fs, "users", "SYNCLEDGER_SERVE_USERS")
	a.bindEnv(fs, "tls-cert", "SYNCLEDGER_SERVE_TLS_CERT")
	a.bindEnv(fs, "tls-key", "SYNCLEDGER_SERVE_TLS_KEY")
	a.bindEnv(fs, "tls-ca", "SYNCLEDGER_SERVE_TLS_CA")
	a.bindEnv(fs, "tls-verify", "SYNCLEDGER_SERVE_TLS_VERIFY")
	a.bindEnv(fs, "ui", "SYNCLEDGER_SERVE_UI")
	markSecret(fs, "token", "password")
	return cmd
}

func serve(ctx context.Context, a *app, cmd *cobra.Command, cfg embedded.Config, o *serveOpts) error {
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
	cfg.Logger = cfg.Logger.With("component", "nats-server")
	cfg.SyncAlways = true // an acknowledged commit survives power loss
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

	nc, err := srv.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	// Commands run inside serve use the embedded server, not --nats.
	a.nc, a.natsURL = nc, srv.ClientURL()
	defer a.close()

	blobsURL := a.blobsURL
	if blobsURL == "" {
		dir := filepath.Join(srv.DataDir(), "blobs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create blob directory: %w", err)
		}
		blobsURL = fileURL(dir)
	}
	info, created, err := createLedger(ctx, a, jetstream.Config{Name: a.ledgerName, Blobs: blobsURL, Replicas: 1})
	if err != nil {
		return err
	}
	if !created {
		if a.blobsURL != "" && info.Blobs != a.blobsURL {
			a.logger.Warn("the ledger exists with another blob store; its setting is kept",
				"ledger", info.Name, "blobs", redactURL(info.Blobs), "asked", redactURL(a.blobsURL))
		}
		if _, err := a.openObjects(ctx, info.Blobs); err != nil {
			a.logger.Warn("the ledger's blob store does not open here", "err", err)
		}
	}
	a.protectBlobs(ctx, info.Blobs)

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

	if o.json {
		// One line, so that a supervisor can read it as soon as it is printed.
		err = json.NewEncoder(a.stdout).Encode(serveInfo{URL: srv.ClientURL(), Data: srv.DataDir(), PID: os.Getpid(), Ledger: info.Name,
			UUID: info.UUID, Blobs: redactURL(info.Blobs), UI: uiURL, TLS: cfg.TLS.CertFile != "",
			Auth: authKind(cfg)})
		if err != nil {
			return err
		}
	} else {
		w := a.stdout
		fmt.Fprintf(w, "syncledger serve: NATS with JetStream listening on %s\n", srv.ClientURL())
		fmt.Fprintf(w, "  data     %s (locked by pid %d)\n", srv.DataDir(), os.Getpid())
		fmt.Fprintf(w, "  ledger   %s  uuid %s  blobs %s\n", info.Name, info.UUID, info.Blobs)
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

	<-ctx.Done()
	a.logger.Info("shutting down", "data", srv.DataDir())
	return uiDone()
}

// serveInfo is what serve --json prints once it is ready.
type serveInfo struct {
	URL    string `json:"url"` // the client URL, without credentials
	Data   string `json:"data"`
	PID    int    `json:"pid"`
	Ledger string `json:"ledger"`
	UUID   string `json:"uuid"`
	Blobs  string `json:"blobs"`
	UI     string `json:"ui,omitempty"` // the dashboard's URL
	TLS    bool   `json:"tls"`
	Auth   string `json:"auth"` // none, token, user, users, client-certificates
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

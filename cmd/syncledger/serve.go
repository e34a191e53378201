package main

import (
	"context"
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

func newServeCmd(a *app) *cobra.Command {
	var cfg embedded.Config
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the embedded default: NATS with JetStream, a blob store and the ledger",
		Long: `Run the embedded default deployment in this process: a nats-server with
JetStream storing its data under --data, and the ledger named by --ledger
(created if absent) with its blobs in DATA/blobs (or --blobs). Prints the URL
hosts connect to and what to run next, then serves until SIGINT or SIGTERM.

The data directory is locked: a second serve on it fails, naming the pid that
holds it. Listening on anything but a loopback address requires --token, or
--user and --password; clients then put the credentials in their --nats URL.`,
		Example: `  syncledger serve
  syncledger serve --listen 127.0.0.1:4333 --data /var/lib/syncledger
  SYNCLEDGER_SERVE_TOKEN=s3cret syncledger serve --listen 0.0.0.0:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), a, cmd, cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", embedded.DefaultListen, "client address host:port (port 0 picks a free one)")
	fs.StringVar(&cfg.DataDir, "data", defaultDataDir(a.getenv), "data directory (JetStream store, blobs, lock)")
	fs.StringVar(&cfg.Token, "token", "", "require clients to present this token")
	fs.StringVar(&cfg.User, "user", "", "require clients to log in as this user (with --password)")
	fs.StringVar(&cfg.Password, "password", "", "the password for --user")
	a.bindEnv(fs, "listen", "SYNCLEDGER_LISTEN")
	a.bindEnv(fs, "data", "SYNCLEDGER_DATA")
	a.bindEnv(fs, "token", "SYNCLEDGER_SERVE_TOKEN")
	a.bindEnv(fs, "user", "SYNCLEDGER_SERVE_USER")
	a.bindEnv(fs, "password", "SYNCLEDGER_SERVE_PASSWORD")
	return cmd
}

func serve(ctx context.Context, a *app, cmd *cobra.Command, cfg embedded.Config) error {
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
		return usagef("%v: give --token, or --user and --password (env SYNCLEDGER_SERVE_TOKEN, SYNCLEDGER_SERVE_USER, SYNCLEDGER_SERVE_PASSWORD), or listen on 127.0.0.1", err)
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

	w := a.stdout
	fmt.Fprintf(w, "syncledger serve: NATS with JetStream listening on %s\n", srv.ClientURL())
	fmt.Fprintf(w, "  data     %s (locked by pid %d)\n", srv.DataDir(), os.Getpid())
	fmt.Fprintf(w, "  ledger   %s  uuid %s  blobs %s\n", info.Name, info.UUID, info.Blobs)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Next, in another terminal (in a source tree, `go run ./cmd/syncledger` for `syncledger`):")
	for _, line := range nextSteps(cmd.Root(), a, cfg, srv.ClientURL()) {
		fmt.Fprintln(w, "  "+line)
	}
	fmt.Fprintln(w, "Stop with Ctrl-C.")

	<-ctx.Done()
	a.logger.Info("shutting down", "data", srv.DataDir())
	return nil
}

// nextSteps lists commands to run against this server: only commands this binary
// has, with the settings that differ from the defaults exported first.
func nextSteps(root *cobra.Command, a *app, cfg embedded.Config, url string) []string {
	var out []string
	switch {
	case cfg.Token != "":
		out = append(out, "export SYNCLEDGER_NATS="+strings.Replace(url, "nats://", "nats://TOKEN@", 1))
	case cfg.User != "":
		out = append(out, "export SYNCLEDGER_NATS="+strings.Replace(url, "nats://", "nats://USER:PASSWORD@", 1))
	case url != DefaultNATS:
		out = append(out, "export SYNCLEDGER_NATS="+url)
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

package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
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

// serverBinary is the name of the server build of this command
// (go build -tags server -o syncledger-server ./cmd/syncledger): the same CLI
// with serve's embedded nats-server linked in.
const serverBinary = "syncledger-server"

// runsInServerBuild reports whether c, a command under root, runs in the
// server build: serve (nats-server) and consume metrics (the Prometheus client
// library).
func runsInServerBuild(root, c *cobra.Command) bool {
	p := c.Parent()
	return (c.Name() == "serve" && p == root) ||
		(c.Name() == "metrics" && p != nil && p.Name() == "consume" && p.Parent() == root)
}

// serverTags are the server build's build tags: server, and those the README
// builds both binaries with (the GCS client's unused gRPC parts left out;
// BENCHMARKS.md, B11).
const serverTags = "server,disable_grpc_modules,grpcnotrace"

// defaultListen is serve's --listen default (embedded.DefaultListen).
const defaultListen = "127.0.0.1:4222"

// serveConfig is serve's part of embedded.Config, as its flags set it.
type serveConfig struct {
	Listen, DataDir       string
	Reserve               string // --reserve: auto, off, or a size
	Token, User, Password string
	TLS                   struct {
		CertFile, KeyFile, CAFile string
		Verify                    bool
	}
}

// serveOpts are serve's flags beyond serveConfig.
type serveOpts struct {
	users    usersFlag
	ui       string
	uiPublic bool
	json     bool
}

func newServeCmd(a *app) *cobra.Command {
	var (
		cfg serveConfig
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

serve keeps --reserve of free space on the data directory's disk: below it
every write is refused at once (clients say "the server's disk is full",
naming the directory and the space to free), and once half as much again is
free writes are taken again, without a restart.

Give each host a user of its own in --users: to revoke one host, remove its
user from the file and send serve SIGHUP; that host is disconnected and
refused, every other connection goes on untouched. Give a host user its host
id ("hosts: [web-1]", and run that host with --host web-1): it then writes
that host's heartbeat alone, never another's.

--ui ADDR serves the dashboard (see "syncledger ui") from this process.
--json prints the startup information as one JSON object instead of text.`,
		Example: `  syncledger serve
  syncledger serve --listen 127.0.0.1:4333 --data /var/lib/syncledger --ui 127.0.0.1:4280
  SYNCLEDGER_SERVE_TOKEN=s3cret syncledger serve --listen 0.0.0.0:4222
  syncledger serve --listen 0.0.0.0:4222 --users users.yaml --tls-cert server.pem --tls-key server-key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), a, cmd, cfg, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", defaultListen, "client address host:port (port 0 picks a free one)")
	fs.StringVar(&cfg.DataDir, "data", defaultDataDir(a.getenv), "data directory (JetStream store, blobs, lock)")
	fs.StringVar(&cfg.Reserve, "reserve", "auto", "free space kept on the data directory's disk: writes are refused below it (auto: 64MiB, or a tenth of a smaller disk; off: never)")
	fs.StringVar(&cfg.Token, "token", "", "require clients to present this token")
	fs.StringVar(&cfg.User, "user", "", "require clients to log in as this user (with --password)")
	fs.StringVar(&cfg.Password, "password", "", "the password for --user")
	fs.Var(&o.users, "users", "YAML file of users, each {user, password | nkey, role: admin|host|tooling, consumers: [NAME] (tooling), hosts: [ID] (host)}")
	fs.StringVar(&cfg.TLS.CertFile, "tls-cert", "", "PEM server certificate: clients must use TLS")
	fs.StringVar(&cfg.TLS.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.TLS.CAFile, "tls-ca", "", "PEM CAs that sign client certificates")
	fs.BoolVar(&cfg.TLS.Verify, "tls-verify", false, "require a client certificate signed by --tls-ca")
	fs.StringVar(&o.ui, "ui", "", "also serve the dashboard on this address, host:port (loopback unless --ui-public)")
	fs.BoolVar(&o.uiPublic, "ui-public", false, "allow --ui on a non-loopback address (the dashboard has no login)")
	fs.BoolVar(&o.json, "json", false, "print the startup information as JSON")
	a.bindEnv(fs, "listen", "SYNCLEDGER_LISTEN")
	a.bindEnv(fs, "data", "SYNCLEDGER_DATA")
	a.bindEnv(fs, "reserve", "SYNCLEDGER_SERVE_RESERVE")
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

// serveInfo is what serve --json prints once it is ready.
type serveInfo struct {
	URL    string `json:"url"` // the client URL, without credentials
	Data   string `json:"data"`
	PID    int    `json:"pid"`
	Ledger string `json:"ledger"`
	UUID   string `json:"uuid"`
	Blobs  string `json:"blobs"`
	UI     string `json:"ui,omitempty"` // the dashboard's URL
	// Reserve is the free space kept on the data directory's disk (0: the
	// watch is off), Free what is free now.
	Reserve uint64 `json:"reserve"`
	Free    uint64 `json:"free"`
	TLS     bool   `json:"tls"`
	Auth    string `json:"auth"` // none, token, user, users, client-certificates
}

// parseReserve parses --reserve: "auto" (0: embedded.DefaultReserve), "off"
// or 0 (-1: no watch), or a size.
func parseReserve(s string) (int64, error) {
	switch s {
	case "auto", "":
		return 0, nil
	case "off":
		return -1, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return 0, usagef("--reserve %q: want auto, off or a size such as 64MiB", s)
	}
	return n, nil // parseSize's 0 is -1: off
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/blobs"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
)

// DefaultNATS is the NATS URL used when neither --nats, SYNCLEDGER_NATS nor
// NATS_URL is set: where `syncledger serve` listens by default.
const DefaultNATS = "nats://127.0.0.1:4222"

// app is the global configuration every command shares, and the resources opened
// from it. A command gets what it needs with NATS, Log and Blobs; each is opened
// once, on first use, and closed by close when the command ends.
type app struct {
	stdout, stderr io.Writer // scrubbed: secrets hidden (secrets.go)
	rawStdout      io.Writer // stdout byte for byte: only for what is not this process's output
	scrub          *scrubber
	getenv         func(string) string

	// Global flags (after env fallbacks, see resolve).
	natsURL     string
	readNATS    string // --read-nats: a nearby server holding a mirror of the ledger ("": read where writing)
	ledgerName  string
	cache       string
	host        string
	hostDefault bool // host is the machine's name, not given: a cache's own id replaces it
	blobsURL    string
	logLevel    string
	logFormat   string
	configFile  string // --config
	natsAuth    natsAuth
	wait        time.Duration // --wait: host.Policy.Wait

	// cfg is the configuration file in effect (nil: none); sources records where
	// each flag's value came from ("flag", "env NAME", "file"; absent: default).
	cfg     *configFile
	sources map[*pflag.Flag]string
	globals *pflag.FlagSet // the root's persistent flags

	logger *slog.Logger
	level  slog.Level

	abort *aborter // ends the running command (abortWith)

	envs []envBinding
	// oneShotSync: the command is `syncledger sync`, whose run counts as one
	// moment, so its fast path may take the last seq from the log's open
	// (natsjs.WithOpenSeq); never a long-lived process.
	oneShotSync bool
	// completeTree, when set, adds the commands newRootCmdFor left out.
	completeTree func()
	started      bool // the command's flags and args were accepted; errors from here on are not usage errors

	res *opened
}

// opened is what an app opened, each on first use, and what to close when the
// command ends. The swamp agent calls NATS, Log, Blobs and Host from several
// goroutines at once (issue 26 point 12), so every field is under a lock. The
// open locks are taken in the order Blobs, Log, NATS (each may call the next);
// mu is taken last, and never held while opening.
type opened struct {
	blobsMu  sync.Mutex
	blobs    *ledger.Bucket
	blobsURL string // where blobs is (redacted), for messages
	logMu    sync.Mutex
	log      *natsjs.Log
	connMu   sync.Mutex
	nats     *natsjs.Client

	mu     sync.Mutex
	closes []func()
	host   string // app.host once Host resolved it, for NATS (see hostName)
}

// envBinding lets an environment variable stand in for a flag not given on the
// command line; the first set variable wins.
type envBinding struct {
	flag *pflag.Flag
	envs []string
}

// newApp returns an app writing to stdout and stderr through scrubWriters that
// hide every secret in effect (secrets.go).
func newApp(stdout, stderr io.Writer, getenv func(string) string) *app {
	s := &scrubber{}
	return &app{stdout: scrubWriter{stdout, s}, stderr: scrubWriter{stderr, s}, rawStdout: stdout, scrub: s, getenv: getenv,
		abort:  &aborter{},
		logger: slog.New(slog.DiscardHandler), sources: map[*pflag.Flag]string{}, res: &opened{}}
}

// bindEnv makes the named flag of fs fall back to the environment variables envs
// (in order) and adds them to the flag's help text. Commands use it for their own
// flags too.
func (a *app) bindEnv(fs *pflag.FlagSet, name string, envs ...string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("bindEnv: no flag " + name)
	}
	f.Usage += " (env " + strings.Join(envs, ", then ") + ")"
	a.envs = append(a.envs, envBinding{flag: f, envs: envs})
}

// addGlobalFlags registers the persistent flags on the root command.
func (a *app) addGlobalFlags(root *cobra.Command) {
	fs := root.PersistentFlags()
	a.globals = fs
	fs.StringVar(&a.natsURL, "nats", DefaultNATS, "NATS server URL; credentials may be given in it (nats://TOKEN@host:port, nats://USER:PASS@host:port)")
	fs.StringVar(&a.ledgerName, "ledger", "default", "ledger name, [A-Za-z0-9_-]{1,64}")
	fs.StringVar(&a.cache, "cache", "", "this host's cache directory (the datastore's files); made a cache if it is not one (default: the nearest directory at or above the working directory holding .syncledger/, as git finds its repository)")
	fs.StringVar(&a.host, "host", "", "this host's id in commits, heartbeats and swamp's locks (default: the cache's own id, kept in .syncledger/host-id: USER@HOST when the cache is first used, with a random suffix if the ledger already has a host of that name; a copy of the cache on another machine or in another directory gets its own)")
	fs.StringVar(&a.blobsURL, "blobs", "", "blob store URL: file:///DIR, s3://BUCKET/PREFIX?endpoint=…&region=…&path-style=true, gs://BUCKET/PREFIX, nats://BUCKET (default: the ledger's own setting)")
	fs.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&a.configFile, "config", "", "YAML configuration file (default $XDG_CONFIG_HOME/syncledger/config.yaml, if it exists)")
	fs.StringVar(&a.readNATS, "read-nats", "", "NATS server URL to read the ledger from: a server near this host holding a mirror of the ledger (syncledger mirror create); commits, locks and admin requests still go to --nats, and what the mirror lacks is read there (default: read from --nats; docs/ops.md, Regions)")
	fs.DurationVar(&a.wait, "wait", host.DefaultWait, "how long a command that reaches the ledger (commit, sync, status, the swamp agent) waits for an answer from the NATS server or the blob store before it gives up; it says what it waits for after "+host.DefaultReport.String())
	a.natsAuth.addFlags(a, fs)
	a.bindEnv(fs, "nats", "SYNCLEDGER_NATS", "NATS_URL")
	a.bindEnv(fs, "read-nats", "SYNCLEDGER_READ_NATS")
	a.bindEnv(fs, "ledger", "SYNCLEDGER_LEDGER")
	a.bindEnv(fs, "cache", "SYNCLEDGER_CACHE")
	a.bindEnv(fs, "host", "SYNCLEDGER_HOST")
	a.bindEnv(fs, "blobs", "SYNCLEDGER_BLOBS")
	a.bindEnv(fs, "log-level", "SYNCLEDGER_LOG_LEVEL")
	a.bindEnv(fs, "log-format", "SYNCLEDGER_LOG_FORMAT")
	a.bindEnv(fs, "config", "SYNCLEDGER_CONFIG")
	a.bindEnv(fs, "wait", "SYNCLEDGER_WAIT")
}

// resolve fills in the flags cmd has that were not given, from the environment,
// then from the configuration file (config.go), then checks the global settings
// and builds the logger. Its errors are usage errors.
func (a *app) resolve(cmd *cobra.Command) error {
	if err := a.applyEnv(cmd); err != nil {
		return err
	}
	if err := a.loadConfig(cmd.Root()); err != nil {
		return err
	}
	if err := a.applyFile(cmd); err != nil {
		return err
	}
	if a.natsAuth.user != "" && a.natsAuth.password == "" {
		markSecret(a.globals, "nats-user") // sent as a token
	}
	a.scrub.setSecrets(a.secretsInEffect(cmd))
	if err := ledger.ValidateName(a.ledgerName); err != nil {
		return &usageError{err}
	}
	if a.blobsURL != "" {
		if _, err := blobs.ParseURL(a.blobsURL); err != nil {
			return &usageError{fmt.Errorf("--blobs: %w", err)}
		}
	}
	if a.host == "" {
		// Until a cache is opened: a cache has its own id (hostcmd.go hostID).
		h, err := os.Hostname()
		if err != nil || h == "" {
			return usagef("no host id: set --host or SYNCLEDGER_HOST (hostname: %v)", err)
		}
		a.host, a.hostDefault = h, true
	}
	if err := a.level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	if a.logFormat != "text" && a.logFormat != "json" {
		return usagef("--log-format %q: want text or json", a.logFormat)
	}
	if a.wait <= 0 {
		return usagef("--wait %v: want a positive duration (60s, 2m)", a.wait)
	}
	if err := a.natsAuth.check(a); err != nil {
		return err
	}
	a.logger = a.newLogger(a.level)
	a.warnConfigMode()
	return nil
}

// applyEnv sets each flag of cmd not given on the command line from the first
// set environment variable bound to it (bindEnv).
func (a *app) applyEnv(cmd *cobra.Command) error {
	for _, b := range a.envs {
		if cmd.Flags().Lookup(b.flag.Name) != b.flag {
			continue
		}
		if b.flag.Changed {
			a.sources[b.flag] = "flag"
			continue
		}
		for _, env := range b.envs {
			v := a.getenv(env)
			if v == "" {
				continue
			}
			if err := b.flag.Value.Set(v); err != nil {
				return usagef("%s=%q: invalid value for --%s: %v", env, redactValue(b.flag, v), b.flag.Name, err)
			}
			a.sources[b.flag] = "env " + env
			break
		}
	}
	return nil
}

// newLogger returns a logger writing to stderr in the configured format at level.
func (a *app) newLogger(level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if a.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(a.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(a.stderr, opts))
}

// onClose registers fn to run when the command ends (in reverse order).
func (a *app) onClose(fn func()) {
	a.res.mu.Lock()
	defer a.res.mu.Unlock()
	a.res.closes = append(a.res.closes, fn)
}

func (a *app) close() {
	a.res.mu.Lock()
	closes := a.res.closes
	a.res.closes = nil
	a.res.mu.Unlock()
	for i := len(closes) - 1; i >= 0; i-- {
		closes[i]()
	}
}

// setHost sets the host id once Host resolved it; hostName reads it from any
// goroutine (a.host itself belongs to the goroutine that runs Host).
func (a *app) setHost(id string) {
	a.res.mu.Lock()
	defer a.res.mu.Unlock()
	a.host, a.res.host = id, id
}

func (a *app) hostName() string {
	a.res.mu.Lock()
	defer a.res.mu.Unlock()
	if a.res.host != "" {
		return a.res.host
	}
	return a.host
}

// NATS returns the NATS client (--nats and the --nats-* credentials),
// connecting on first use. A refusal of the server that no operation claims
// ends the command (natsRefused).
func (a *app) NATS(ctx context.Context) (*natsjs.Client, error) {
	a.res.connMu.Lock()
	defer a.res.connMu.Unlock()
	if a.res.nats != nil {
		return a.res.nats, nil
	}
	cfg := natsjs.Config{
		Write:   a.natsAuth.endpoint(dialURL(a.natsURL)),
		Name:    "syncledger " + a.hostName(),
		Refused: a.natsRefused,
		Logger:  a.logger,
	}
	at := a.natsURL
	if a.readNATS != "" {
		// The read endpoint is connected to first (the write endpoint in
		// the background): a connect error is the read endpoint's.
		cfg.Read, at = a.natsAuth.endpoint(dialURL(a.readNATS)), a.readNATS
	}
	c, err := natsjs.Open(ctx, cfg)
	var ce *natsjs.ConnectError
	switch {
	case errors.As(err, &ce):
		return nil, &unreachableError{fmt.Errorf("connect to NATS at %s: %w (%s)", redactURL(at), ce.Err, connectHint(ce.Cause))}
	case err != nil:
		return nil, a.natsAuth.settingError(err)
	}
	a.res.nats = c
	a.onClose(c.Close)
	return c, nil
}

// unreachableError is a failure to connect to the NATS server.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// Is makes errors.Is(err, ledger.ErrUnreachable) hold: the libraries' callers
// (the swamp agent) tell an unreachable server by it, not by the text.
func (e *unreachableError) Is(target error) bool { return target == ledger.ErrUnreachable }

// ledgerOn returns the NATS resources of ledger name, connecting on first use.
func (a *app) ledgerOn(ctx context.Context, name string) (*natsjs.Ledger, error) {
	c, err := a.NATS(ctx)
	if err != nil {
		return nil, err
	}
	return c.Ledger(name), nil
}

// Log opens the ledger's log (--ledger) on first use. A ledger that does not exist
// is an error that says how to create it.
func (a *app) Log(ctx context.Context) (*natsjs.Log, error) {
	a.res.logMu.Lock()
	defer a.res.logMu.Unlock()
	if a.res.log != nil {
		return a.res.log, nil
	}
	lg, err := a.ledgerOn(ctx, a.ledgerName)
	if err != nil {
		return nil, err
	}
	var opts []natsjs.Option
	if a.oneShotSync {
		opts = append(opts, natsjs.WithOpenSeq())
	}
	l, err := lg.Log(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w (NATS at %s)", err, redactURL(a.natsURL))
	}
	a.res.log = l
	return l, nil
}

// resetLedger forgets the ledger's log and blob store opened so far: a
// restore replaced their streams on the server, the next use opens them
// again.
func (a *app) resetLedger() {
	a.res.logMu.Lock()
	a.res.log = nil
	a.res.logMu.Unlock()
	a.res.blobsMu.Lock()
	a.res.blobs = nil // closed with the command, as every bucket opened
	a.res.blobsMu.Unlock()
}

// BlobsURL returns the blob store URL in effect: --blobs if given, otherwise the
// ledger's own setting.
func (a *app) BlobsURL(ctx context.Context) (string, error) {
	if a.blobsURL != "" {
		return a.blobsURL, nil
	}
	l, err := a.Log(ctx)
	if err != nil {
		return "", err
	}
	info, err := l.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("read ledger %q settings: %w", a.ledgerName, err)
	}
	if info.Blobs == "" {
		return "", fmt.Errorf("ledger %q has no blob store setting: give --blobs or SYNCLEDGER_BLOBS: %w", a.ledgerName, ledger.ErrInvalid)
	}
	return info.Blobs, nil
}

// Blobs opens the ledger's blob store on first use (see BlobsURL), under the
// default retry policy: transient failures (5xx, resets, timeouts) are
// retried with backoff; a commit that still cannot upload fails before it
// publishes anything.
func (a *app) Blobs(ctx context.Context) (*ledger.Bucket, error) {
	a.res.blobsMu.Lock()
	defer a.res.blobsMu.Unlock()
	if a.res.blobs != nil {
		return a.res.blobs, nil
	}
	raw, err := a.BlobsURL(ctx)
	if err != nil {
		return nil, err
	}
	b, err := a.openBucket(ctx, raw, ledger.RetryPolicy{})
	if err != nil {
		return nil, err
	}
	a.res.blobs, a.res.blobsURL = b, redactURL(raw)
	return b, nil
}

// openBucket opens the bucket at raw under the retry policy p, through
// blobs.Open (the one way a blob store, or a swamp datastore, is built), and
// closes it when the command ends. A nats:// store uses the NATS connection.
func (a *app) openBucket(ctx context.Context, raw string, p ledger.RetryPolicy) (*ledger.Bucket, error) {
	opts, err := a.blobsOptions(ctx, raw)
	if err != nil {
		return nil, err
	}
	opts.Retry = p
	b, err := blobs.Open(ctx, raw, opts)
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", redactURL(raw), err)
	}
	a.onClose(func() { _ = b.Close() })
	return b, nil
}

// openDriver opens the driver of the store at raw, for an admin's checks of
// the backend's own settings (protectBlobs); the caller closes it.
func (a *app) openDriver(ctx context.Context, raw string) (driver.Bucket, error) {
	spec, err := blobs.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	opts, err := a.blobsOptions(ctx, raw)
	if err != nil {
		return nil, err
	}
	d, err := blobs.OpenDriver(ctx, spec, opts)
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", redactURL(raw), err)
	}
	return d, nil
}

// blobsOptions is what blobs.Open needs besides raw: for a nats:// store, the
// NATS connection.
func (a *app) blobsOptions(ctx context.Context, raw string) (blobs.Options, error) {
	var opts blobs.Options
	if strings.HasPrefix(raw, "nats:") {
		c, err := a.NATS(ctx)
		if err != nil {
			return blobs.Options{}, err
		}
		opts.NATS = c.ObjectStore
	}
	return opts, nil
}

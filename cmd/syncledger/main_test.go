package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/internal/agenttrace"
	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger"
)

// binPath is the syncledger binary TestMain builds once for the end-to-end tests.
var binPath string

func TestMain(m *testing.M) {
	if ran, code := agenttrace.Main(); ran { // between swamp and an agent (swamp_real_test.go)
		os.Exit(code)
	}
	testmain.Setup()
	// The end-to-end tests wait on the CLI processes they run, not the CPU.
	testmain.Parallel(8)
	dir, err := os.MkdirTemp("", "syncledger-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "syncledger")
	// go test puts its own GOROOT/bin first on the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(os.Stderr, "the go command is not on PATH (%v): run the tests with go test, or put Go's bin directory on PATH\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// `go run -exec cp` builds as go build does, then copies the binary out;
	// unlike go build it keeps the linked binary in the build cache, so an
	// unchanged tree costs no link (a second or two each, the package's
	// largest CPU cost). The two builds run at once.
	// The tags the binaries are shipped with (serverTags: server, and the GCS
	// client's unused gRPC parts left out).
	cliTags, srvTags := strings.TrimPrefix(serverTags, "server,"), serverTags
	if failpointsEnabled { // the crash tests need binaries that honour FailpointEnv
		cliTags, srvTags = cliTags+",failpoints", srvTags+",failpoints"
	}
	var g errgroup.Group
	for _, b := range []struct{ out, tags string }{{binPath, cliTags}, {filepath.Join(dir, serverBinary), srvTags}} {
		g.Go(func() error {
			// serve runs in the server build, found beside the binary (serve_exec.go).
			if out, err := exec.Command(goBin, "run", "-exec", "cp", "-tags", b.tags, ".", b.out).CombinedOutput(); err != nil {
				return fmt.Errorf("build %s: %v\n%s", filepath.Base(b.out), err, out)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	conflict := fmt.Errorf("commit: %w", &ledger.ConflictError{Partition: "audit", Expected: 3, Actual: 5})
	truncated := fmt.Errorf("sync: %w", &ledger.TruncatedError{From: 1, First: 10})
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), 1},
		{fmt.Errorf("x: %w", ledger.ErrNotFound), 1},
		{usagef("bad flag"), 2},
		{fmt.Errorf("wrapped: %w", usagef("bad flag")), 2},
		{conflict, 3},
		{truncated, 4},
		{withExitCode(7, nil), 7},
		{withExitCode(0, nil), 0},
		{withExitCode(5, conflict), 5}, // an explicit code wins
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if !silent(withExitCode(7, nil)) || silent(withExitCode(7, errors.New("x"))) {
		t.Error("silent: only a nil error is silent")
	}
}

// resolveWith runs the version command in-process with env and returns the app
// after flags and environment were resolved.
func resolveWith(t *testing.T, env map[string]string, args ...string) (*app, int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := newApp(&stdout, &stderr, func(k string) string { return env[k] })
	root := newRootCmd(a)
	root.SetArgs(append(args, "version"))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.ExecuteContext(context.Background())
	if err != nil && !a.started {
		err = &usageError{err}
	}
	return a, exitCode(err), fmt.Sprint(err)
}

func TestGlobalFlagsAndEnv(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want app // only the compared fields
	}{
		{"defaults", nil, nil,
			app{natsURL: DefaultNATS, ledgerName: "default", cache: "", host: host, logLevel: "info", logFormat: "text"}},
		{"NATS_URL", map[string]string{"NATS_URL": "nats://a:1"}, nil,
			app{natsURL: "nats://a:1", ledgerName: "default", cache: "", host: host, logLevel: "info", logFormat: "text"}},
		{"SYNCLEDGER_NATS before NATS_URL", map[string]string{"NATS_URL": "nats://a:1", "SYNCLEDGER_NATS": "nats://b:2"}, nil,
			app{natsURL: "nats://b:2", ledgerName: "default", cache: "", host: host, logLevel: "info", logFormat: "text"}},
		{"flag before env", map[string]string{"SYNCLEDGER_NATS": "nats://b:2", "SYNCLEDGER_LEDGER": "envl"}, []string{"--nats", "nats://c:3", "--ledger", "flagl"},
			app{natsURL: "nats://c:3", ledgerName: "flagl", cache: "", host: host, logLevel: "info", logFormat: "text"}},
		{"all env", map[string]string{
			"SYNCLEDGER_LEDGER": "prod", "SYNCLEDGER_CACHE": "/c", "SYNCLEDGER_HOST": "h1",
			"SYNCLEDGER_BLOBS": "file:///b", "SYNCLEDGER_LOG_LEVEL": "debug", "SYNCLEDGER_LOG_FORMAT": "json"}, nil,
			app{natsURL: DefaultNATS, ledgerName: "prod", cache: "/c", host: "h1", blobsURL: "file:///b", logLevel: "debug", logFormat: "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, code, msg := resolveWith(t, tc.env, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, msg)
			}
			got := app{natsURL: a.natsURL, ledgerName: a.ledgerName, cache: a.cache, host: a.host,
				blobsURL: a.blobsURL, logLevel: a.logLevel, logFormat: a.logFormat}
			w := tc.want
			if got.natsURL != w.natsURL || got.ledgerName != w.ledgerName || got.cache != w.cache || got.host != w.host ||
				got.blobsURL != w.blobsURL || got.logLevel != w.logLevel || got.logFormat != w.logFormat {
				t.Errorf("got %+v\nwant %+v", got, w)
			}
		})
	}
}

func TestGlobalUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"bad ledger", nil, []string{"--ledger", "a.b"}, "invalid ledger name"},
		{"bad ledger from env", map[string]string{"SYNCLEDGER_LEDGER": "a b"}, nil, "invalid ledger name"},
		{"bad log level", nil, []string{"--log-level", "loud"}, "--log-level"},
		{"bad log format from env", map[string]string{"SYNCLEDGER_LOG_FORMAT": "xml"}, nil, "--log-format"},
		{"bad blobs", nil, []string{"--blobs", "ftp://x"}, "--blobs"},
		{"unknown flag", nil, []string{"--bogus"}, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, msg := resolveWith(t, tc.env, tc.args...)
			if code != exitUsage || !strings.Contains(msg, tc.want) {
				t.Errorf("exit %d, %q; want exit %d mentioning %q", code, msg, exitUsage, tc.want)
			}
		})
	}
}

func TestReplicasEnv(t *testing.T) {
	t.Parallel()
	a, code, msg := resolveWith(t, map[string]string{"SYNCLEDGER_REPLICAS": "x"})
	_ = a
	if code != 0 {
		t.Fatalf("an env var of a flag the command does not have must be ignored: exit %d %s", code, msg)
	}
}

// TestHotCommands: each command newRootCmdFor builds alone is the one of that
// name in the whole tree, and a configuration file's keys are still checked
// against every command when only a hot one was built.
func TestHotCommands(t *testing.T) {
	full := newRootCmd(newApp(io.Discard, io.Discard, func(string) string { return "" }))
	for name, mk := range hotCommands {
		c := mk(newApp(io.Discard, io.Discard, func(string) string { return "" }))
		if c.Name() != name {
			t.Errorf("hotCommands[%q] builds %q", name, c.Name())
		}
		if f, _, err := full.Find([]string{name}); err != nil || f.Name() != name {
			t.Errorf("the tree has no command %q", name)
		}
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("serve:\n  listen: 127.0.0.1:4999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	env := map[string]string{"SYNCLEDGER_CONFIG": cfg}
	if code := run(context.Background(), []string{"version"}, io.Discard, &stderr, func(k string) string { return env[k] }); code != 0 {
		t.Errorf("version with a file setting serve's listen: exit %d, %s", code, stderr.String())
	}
	if err := os.WriteFile(cfg, []byte("serve:\n  nosuchflag: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"version"}, io.Discard, &stderr, func(k string) string { return env[k] }); code != 2 || !strings.Contains(stderr.String(), "nosuchflag") {
		t.Errorf("version with an unknown key of serve: exit %d, %s; want 2 naming the key", code, stderr.String())
	}
}

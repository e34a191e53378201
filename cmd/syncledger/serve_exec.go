//go:build !server

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// serverEnv names a server binary to use instead of looking for one.
const serverEnv = "SYNCLEDGER_SERVER_BINARY"

// modulePath is the module this command is built from.
const modulePath = "github.com/syncledger/syncledger"

// runServe hands serve to the server build, in this process (exec: same pid,
// arguments, environment, standard streams and exit code). The default build
// does not link nats-server: its package inits and its size cost every other
// command a third of its start-up (BENCHMARKS.md, B11), and only serve uses it.
//
// The server binary is $SYNCLEDGER_SERVER_BINARY, else syncledger-server beside
// this executable, else on PATH; a development build run inside the source tree
// (go run ./cmd/syncledger serve) builds it with go build -tags server.
func runServe(ctx context.Context, a *app, _ *cobra.Command, _ serveConfig, _ *serveOpts) error {
	bin, err := findServer(ctx, a)
	if err != nil {
		return err
	}
	return execServer(bin, append([]string{bin}, os.Args[1:]...))
}

// runConsumeMetrics hands consume metrics to the server build, as runServe
// does serve: the Prometheus client library it uses is linked only there (its
// package inits would cost every other command's start-up; BENCHMARKS.md, B11).
func runConsumeMetrics(ctx context.Context, a *app, _ *consumeOpts, _ string, _ int) error {
	bin, err := findServer(ctx, a)
	if err != nil {
		return err
	}
	return execServer(bin, append([]string{bin}, os.Args[1:]...))
}

// serveHandOff execs the server build at once for a command line that runs
// in it (serve, consume metrics), before the flags, environment and
// configuration file are read: the server build reads them itself (resolving
// them here too would warn twice). Any other command line returns nil.
func serveHandOff(ctx context.Context, a *app, root *cobra.Command, args []string) error {
	c, _, err := root.Find(args)
	if err != nil || !runsInServerBuild(root, c) || asksHelp(args) {
		return nil
	}
	bin, err := findServer(ctx, a)
	if err != nil {
		return err
	}
	return execServer(bin, append([]string{bin}, args...))
}

// asksHelp reports whether a command line asks for its help (-h, --help
// before any "--"): this build prints it, the same text as the server
// build's, without needing the server build (issue 39).
func asksHelp(args []string) bool {
	for _, arg := range args {
		switch arg {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
}

// findServer returns the path of the server binary (see runServe).
func findServer(ctx context.Context, a *app) (string, error) {
	if p := a.getenv(serverEnv); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), serverBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(serverBinary); err == nil {
		return p, nil
	}
	how := fmt.Sprintf("build it beside this binary: GOTOOLCHAIN=go1.27.3 go build -tags %s -o %s ./cmd/syncledger (in the source tree), or set %s",
		serverTags, filepath.Join(executableDir(), serverBinary), serverEnv)
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != modulePath || bi.Main.Version != "(devel)" {
		return "", fmt.Errorf("serve and consume metrics run in the server build of syncledger, %s, which is not beside this binary nor on PATH: %s", serverBinary, how)
	}
	return buildServer(ctx, a, how)
}

// buildServer builds the server binary from the source tree the working
// directory is in, for a development build (go run ./cmd/syncledger serve).
func buildServer(ctx context.Context, a *app, how string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(gomod))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("serve and consume metrics run in the server build of syncledger, %s, not found, and the working directory is not in syncledger's source tree to build it: %s", serverBinary, how)
	}
	if b, err := os.ReadFile(mod); err != nil || !bytes.HasPrefix(b, []byte("module "+modulePath+"\n")) {
		return "", fmt.Errorf("serve and consume metrics run in the server build of syncledger, %s, not found, and %s is not syncledger's module: %s", serverBinary, mod, how)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "syncledger", serverBinary)
	// go run -exec cp builds as go build does, then copies the binary to out;
	// unlike go build it keeps the linked binary in the build cache, so the
	// next serve from an unchanged tree links nothing. Windows has no cp.
	// It is copied beside out and renamed over it: cp onto a server build
	// another serve is running would fail (text file busy).
	tmp := out + ".new"
	args := []string{"run", "-exec", "cp", "-tags", serverTags, modulePath + "/cmd/syncledger", tmp}
	if runtime.GOOS == "windows" {
		args = []string{"build", "-tags", serverTags, "-o", tmp, modulePath + "/cmd/syncledger"}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w (%s)", serverBinary, err, how)
	}
	fmt.Fprintf(a.stderr, "syncledger serve: building the server build (go %s)\n", strings.Join(args, " "))
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = filepath.Dir(mod)
	if b, err := build.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s: %v\n%s(%s)", serverBinary, err, b, how)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build %s: %w (%s)", serverBinary, err, how)
	}
	return out, nil
}

func executableDir() string {
	self, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(self)
}

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeHelpWithoutServerBuild: serve --help (and consume metrics --help)
// print their help from the plain build, with no server build beside it, on
// PATH or in a source tree (issue 39: it printed no help, only that the server
// build was missing).
func TestServeHelpWithoutServerBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "syncledger")
	if out, err := exec.Command("cp", binPath, bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the binary: %v\n%s", err, out)
	}
	env := cliEnv("PATH=/usr/bin:/bin")
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"--ledger", "x", "serve", "--help"}, {"consume", "metrics", "--help"}} {
		r := cliBin(t, bin, dir, env, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || strings.Contains(r.stderr, serverBinary) {
			t.Errorf("syncledger %s: exit %d, want 0 and the help\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Without --help serve still needs the server build, and says how to get it.
	r := cliBin(t, bin, dir, env, "serve")
	if r.code != 1 || !strings.Contains(r.stderr, "go build -tags "+serverTags) {
		t.Errorf("syncledger serve without the server build: exit %d, stderr %q; want 1 naming the build", r.code, r.stderr)
	}
}

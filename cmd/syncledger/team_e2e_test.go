package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// swampRepoT makes a swamp repo (its .swamp.yaml, as swamp repo init writes
// it) set up on ledger "infra" of a new server by syncledger swamp setup, as
// host name; it returns the repo and the server's URL.
func swampRepoT(t *testing.T, name string, setupArgs ...string) (repo, url string) {
	t.Helper()
	srv, _ := natsjstest.RunServer(t)
	url = srv.ClientURL()
	c := &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+url, "SYNCLEDGER_LOG_LEVEL=warn")}
	c.ok("--ledger", "infra", "init", "--blobs", fileURL(filepath.Join(t.TempDir(), "blobs")))
	repo = filepath.Join(t.TempDir(), "infra")
	if err := os.MkdirAll(filepath.Join(repo, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".swamp.yaml"), []byte("repoId: 3799dce6-3e89-448c-aded-f1c0af98351f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok(append([]string{"--nats", url, "--ledger", "infra", "--host", name, "swamp", "setup", "--repo", repo}, setupArgs...)...)
	return repo, url
}

// TestStatusInSwampRepo: status run in a swamp repo set up on a ledger — at
// its root, below it, or in its cache — shows the repo's cache on its ledger,
// with nothing given but the working directory (issue 39: it exited 2).
func TestStatusInSwampRepo(t *testing.T) {
	t.Parallel()
	repo, url := swampRepoT(t, "ci-3")
	cache := filepath.Join(repo, ".swamp", "syncledger-cache")
	for _, dir := range []string{repo, filepath.Join(repo, "models"), cache} {
		r := cliIn(t, dir, cliEnv(), "status", "--json")
		if r.code != 0 {
			t.Fatalf("status in %s: exit %d\n%s", dir, r.code, r.stderr)
		}
		var st struct {
			Ledger, Host, Cache string
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status --json in %s: %v\n%s", dir, err, r.stdout)
		}
		if st.Ledger != "infra" || st.Host != "ci-3" || st.Cache != cache {
			t.Errorf("status in %s: ledger %q host %q cache %q; want infra, ci-3, %s", dir, st.Ledger, st.Host, st.Cache, cache)
		}
	}
	// Given settings win over the repo's: another ledger is another ledger.
	if r := cliIn(t, repo, cliEnv(), "--nats", url, "--ledger", "nope", "status"); r.code == 0 {
		t.Errorf("status --ledger nope in the repo: exit 0, want the ledger's error\n%s", r.stdout)
	}
	// A repo whose host has not run setup says so.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.MkdirAll(filepath.Join(other, ".swamp"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	if err := os.WriteFile(filepath.Join(other, ".swamp.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := cliIn(t, other, cliEnv(), "status")
	if r.code != 2 || !strings.Contains(r.stderr, "syncledger swamp setup --repo "+other) {
		t.Errorf("status in a checkout without setup: exit %d, stderr %q; want 2 naming setup", r.code, r.stderr)
	}
}

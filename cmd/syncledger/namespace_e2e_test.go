package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/swamp/agent"
)

// fakeSwampRepo is a directory setup takes for a swamp repo: a .swamp.yaml
// with its repoId, no data.
func fakeSwampRepo(t *testing.T, repoID string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".swamp.yaml"), "repoId: "+repoID+"\n")
	return dir
}

// TestSwampSetupNamespaceCollisionCLI is issue 38 point 11: `swamp setup
// --ledger prod --namespace eu` adopted an unrelated existing plain ledger
// prod_eu (ledger names may hold '_'), importing the repo's data into another
// team's datastore and pulling theirs into this cache. Now setup refuses it,
// saying what to do, before it registers or writes anything; a namespace
// setup creates its ledger marked as that namespace of the base, which a
// second host's setup recognises; a namespace's ledger made by the previous
// release (unmarked, the namespace registered for the repo) is recognised by
// the registry and marked.
func TestSwampSetupNamespaceCollisionCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "prod")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	const repoID = "5d6c9c1e-2b8e-4a7b-9c1d-3e4f5a6b7c8d"
	nc := natsjstest.Connect(t, c.natsURL())
	base, err := natsjs.OpenLog(t.Context(), nc, "prod")
	if err != nil {
		t.Fatal(err)
	}
	client, err := natsjs.Open(t.Context(), natsjs.Config{Write: natsjs.Endpoint{URL: c.natsURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	kv, err := client.Ledger("prod").SwampKV(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// Another team's plain ledger prod_eu, with their file.
	c.ok("--ledger", "prod_eu", "init", "--blobs", "file://"+t.TempDir())
	theirs := t.TempDir()
	put(t, theirs, "notes/theirs", "another team's")
	c.ok("--ledger", "prod_eu", "--cache", theirs, "--host", "them", "commit")

	repo := fakeSwampRepo(t, repoID)
	put(t, repo, ".swamp/data/t/m/x/metadata.yaml", "this repo's") // what setup's import would publish
	before, _ := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	r := c.run("swamp", "setup", "--repo", repo, "--namespace", "eu")
	if r.code == 0 || !strings.Contains(r.stderr, `ledger "prod_eu" exists and is not namespace "eu" of ledger "prod"`) ||
		!strings.Contains(r.stderr, "pick another namespace") {
		t.Fatalf("setup onto another team's ledger prod_eu: exit %d, want a refusal saying what to do:\n%s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(repo, ".swamp.yaml")); !bytes.Equal(before, after) {
		t.Fatalf("a refused setup changed .swamp.yaml:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(repo, ".swamp", "syncledger-cache")); !os.IsNotExist(err) {
		t.Fatalf("a refused setup made the cache: %v", err)
	}
	if owner, err := agent.NamespaceOwner(t.Context(), kv, "eu"); err != nil || owner != "" {
		t.Fatalf("a refused setup registered namespace eu: %q, %v", owner, err)
	}
	if got := tree(t, theirs); len(got) != 1 {
		t.Fatalf("the other team's cache: %v", got)
	}
	var st cliStatus
	if err := json.Unmarshal([]byte(c.ok("--ledger", "prod_eu", "--cache", theirs, "status", "--json")), &st); err != nil || st.Head != 1 {
		t.Fatalf("prod_eu after the refused setup: head %d, %v; want its one commit (this repo's data imported into it?)", st.Head, err)
	}

	// A genuine namespace: created marked, taken by the repo's second host.
	c.ok("swamp", "setup", "--repo", repo, "--namespace", "ci", "--skip-import")
	ci, err := natsjs.OpenLog(t.Context(), nc, "prod_ci")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := ci.Info(t.Context()); info.NamespaceOf != base.UUID() || info.Namespace != "ci" {
		t.Fatalf("prod_ci: %+v, want marked namespace ci of %s", info, base.UUID())
	}
	second := fakeSwampRepo(t, repoID)
	c.ok("--host", "second", "swamp", "setup", "--repo", second, "--namespace", "ci", "--skip-import")

	// A namespace's ledger the previous release made: no mark, the namespace
	// registered for the repo. Recognised and marked.
	c.ok("--ledger", "prod_old", "init", "--blobs", "file://"+t.TempDir())
	if err := agent.RegisterNamespace(t.Context(), kv, "old", repoID); err != nil {
		t.Fatal(err)
	}
	r = c.run("swamp", "setup", "--repo", fakeSwampRepo(t, repoID), "--namespace", "old", "--skip-import")
	if r.code != 0 || !strings.Contains(r.stderr, "marked ledger prod_old as namespace old of ledger prod") {
		t.Fatalf("setup of a namespace made before the mark: exit %d\n%s", r.code, r.stderr)
	}
	old, err := natsjs.OpenLog(t.Context(), nc, "prod_old")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := old.Info(t.Context()); info.NamespaceOf != base.UUID() || info.Namespace != "old" {
		t.Fatalf("prod_old after setup: %+v", info)
	}
}

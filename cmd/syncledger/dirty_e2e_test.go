//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/projector/dirty"
)

// waitWatcher waits until a watch's dirty-set watcher answers for cache.
func waitWatcher(t *testing.T, cache string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := dirty.NewClient(cache).Wait(ctx); err != nil {
		t.Fatalf("the watch's dirty set never answered: %v", err)
	}
}

// TestDirtySetCLI: commits beside a running watch check only its dirty set once
// a full scan made it trusted; a change made while no watch ran (the watch
// killed, then started again) is still committed, because the new watch's set
// is untrusted until a full scan; --hint adds paths. Every host ends with the
// same files.
func TestDirtySetCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "dirtyset")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	local, other := t.TempDir(), t.TempDir()
	put(t, local, "m/a", "1")
	c.ok("--cache", local, "--host", "local", "commit")

	commit := func(args ...string) result {
		t.Helper()
		r := c.run(append([]string{"--cache", local, "--host", "local", "--log-level", "debug", "commit"}, args...)...)
		if r.code != 0 {
			t.Fatalf("commit: exit %d\n%s", r.code, r.stderr)
		}
		return r
	}
	wantScan := func(r result, full bool) {
		t.Helper()
		if got := strings.Contains(r.stderr, "scanning the cache"); got != full {
			t.Fatalf("commit scanned the whole cache: %v, want %v; stderr:\n%s", got, full, r.stderr)
		}
		if !full && !strings.Contains(r.stderr, "checking the dirty set") {
			t.Fatalf("commit did not use the dirty set; stderr:\n%s", r.stderr)
		}
	}

	w := startProc(t, c.env, "--cache", local, "--host", "local", "watch")
	waitWatcher(t, local)
	put(t, local, "m/b", "2")
	r := commit()
	wantScan(r, true) // the new watch has seen no full scan yet
	if !strings.Contains(r.stdout, "m/b") {
		t.Fatalf("first commit beside the watch: %s", r.stdout)
	}

	put(t, local, "m/c", "3")
	r = commit()
	wantScan(r, false)
	if !strings.Contains(r.stdout, "m/c") || strings.Contains(r.stdout, "m/b") {
		t.Fatalf("commit from the dirty set: %s", r.stdout)
	}
	r = commit()
	wantScan(r, false)
	if !strings.Contains(r.stdout, "nothing to commit") || !strings.Contains(r.stderr, "nothing changed since the last full scan") {
		t.Fatalf("no-op commit from the dirty set did not take the empty set's fast path: %s\n%s", r.stdout, r.stderr)
	}

	// Killed: nothing records what changes while no watch runs.
	w.kill()
	put(t, local, "m/while-none-ran", "4")
	r = commit()
	wantScan(r, true)
	if !strings.Contains(r.stdout, "m/while-none-ran") {
		t.Fatalf("commit with no watch: %s", r.stdout)
	}
	put(t, local, "m/while-none-ran-2", "5")
	w = startProc(t, c.env, "--cache", local, "--host", "local", "watch")
	waitWatcher(t, local)
	r = commit()
	wantScan(r, true)
	if !strings.Contains(r.stdout, "m/while-none-ran-2") {
		t.Fatalf("a change made while no watch ran was not committed: %s", r.stdout)
	}

	// Hints add paths to a trusted set.
	put(t, local, "m/hinted", "6")
	r = commit("--hint", "m/hinted", "--hint", local+"/m/a")
	wantScan(r, false)
	if !strings.Contains(r.stdout, "m/hinted") {
		t.Fatalf("hinted commit: %s", r.stdout)
	}
	if r := c.run("--cache", local, "commit", "--hint", "/elsewhere/x"); r.code != 2 {
		t.Fatalf("a hint outside the cache: exit %d, want 2", r.code)
	}

	// exec's commit checks the dirty set too: what its command wrote is committed.
	r = c.run("--cache", local, "--host", "local", "--log-level", "debug", "exec", "--", "sh", "-c", `echo e > "$SYNCLEDGER_CACHE/m/by-exec"`)
	if r.code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.code, r.stderr)
	}
	wantScan(r, false)
	if !strings.Contains(r.stderr, "msg=committed") {
		t.Fatalf("exec committed nothing; stderr:\n%s", r.stderr)
	}

	if code := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exit %d; stderr:\n%s", code, w.stderr)
	}
	c.ok("--cache", other, "--host", "other", "sync")
	if diff := cmp.Diff(tree(t, local), tree(t, other)); diff != "" {
		t.Fatalf("caches differ (-local +other):\n%s", diff)
	}
}

// TestHardLinkEditCLI is issue 26 point 8 through the CLI: beside a running
// watch, an edit made through a hard link from outside the cache raises no
// event in it; the commit from the dirty set said "nothing to commit" while
// status listed the file, and it was never published. Now the watch lists
// every file with more than one link in its set, and the edit is committed.
func TestHardLinkEditCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "hardlink")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	local, other, outside := t.TempDir(), t.TempDir(), t.TempDir()
	put(t, local, "m/a", "1")
	put(t, local, "m/b", "1")
	c.ok("--cache", local, "--host", "local", "commit")
	if err := os.Link(filepath.Join(local, "m", "a"), filepath.Join(outside, "a")); err != nil {
		t.Fatal(err)
	}
	w := startProc(t, c.env, "--cache", local, "--host", "local", "watch")
	waitWatcher(t, local)
	put(t, local, "m/b", "2")
	c.ok("--cache", local, "--host", "local", "commit") // the full scan that makes the set trusted

	if err := os.WriteFile(filepath.Join(outside, "a"), []byte("edited through the link"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.run("--cache", local, "--host", "local", "--log-level", "debug", "commit")
	if r.code != 0 || !strings.Contains(r.stderr, "checking the dirty set") || !strings.Contains(r.stdout, "m/a") {
		t.Fatalf("commit from the dirty set after an edit through a hard link: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if code := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exit %d; stderr:\n%s", code, w.stderr)
	}
	c.ok("--cache", other, "--host", "other", "sync")
	if got := tree(t, other)["m/a"]; got != "edited through the link" {
		t.Fatalf("other host's m/a = %q", got)
	}
}

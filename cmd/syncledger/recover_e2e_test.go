package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkConverged is #14's acceptance check after a way out was taken: every
// cache, a fresh host and a rebuild (of another fresh host) hold identical
// files, with hwm == head and nothing uncommitted. except lists paths that stay
// local to the cache holding them (files the ledger cannot carry).
func checkConverged(c *shell, caches []string, except ...string) {
	c.t.Helper()
	t := c.t
	for _, cache := range caches {
		c.ok("--cache", cache, "sync")
	}
	fresh, rebuilt := t.TempDir(), t.TempDir()
	c.ok("--cache", fresh, "--host", "fresh", "sync")
	c.ok("--cache", rebuilt, "--host", "rebuilt", "sync")
	c.ok("--cache", rebuilt, "--host", "rebuilt", "rebuild", "--quiet")
	want := tree(t, fresh)
	for _, cache := range append(caches, rebuilt) {
		got := tree(t, cache)
		maps.DeleteFunc(got, func(p, _ string) bool {
			for _, e := range except {
				if p == e {
					return true
				}
			}
			return false
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("cache %s differs from a fresh host (-fresh +cache):\n%s", cache, diff)
		}
	}
	for _, cache := range append(caches, fresh, rebuilt) {
		if st := c.status(cache); st.HWM != st.Head || len(st.Dirty) != 0 {
			t.Fatalf("cache %s: hwm %d, head %d, dirty %v", cache, st.HWM, st.Head, st.Dirty)
		}
		c.ok("--cache", cache, "verify")
	}
}

// A partition key too long for a subject token (#14 point 5: three 80-character
// Japanese directory names under data/ give a ≈2,174-byte token) no longer blocks
// every commit: its file is left out with a warning naming it, the other files
// are committed, and every host converges.
func TestLongPartitionKeyCLI(t *testing.T) {
	c := newCLI(t, "longkey")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	dir := strings.Repeat("デ", 80)
	long := "data/" + dir + "/" + dir + "/" + dir + "/metadata.yaml"
	put(t, a, long, "too deep to carry")
	put(t, a, "audit/one", "1")
	put(t, a, "data/t/m/x/metadata.yaml", "x")
	r := c.run("--cache", a, "--host", "a", "commit")
	if r.code != 0 {
		t.Fatalf("commit beside a file whose partition cannot be carried: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "not synced") || !strings.Contains(r.stderr, dir) || !strings.Contains(r.stderr, "too large") {
		t.Fatalf("commit did not warn naming the file left out:\n%s", r.stderr)
	}
	c.ok("--cache", b, "--host", "b", "sync")
	if got := tree(t, b); got["audit/one"] != "1" || got["data/t/m/x/metadata.yaml"] != "x" || len(got) != 2 {
		t.Fatalf("host b holds %v", got)
	}
	// Later commits of other files go on as before.
	put(t, a, "audit/two", "2")
	c.ok("--cache", a, "--host", "a", "commit")
	checkConverged(c, []string{a, b}, long)
}

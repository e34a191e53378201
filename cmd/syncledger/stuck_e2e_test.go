package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stuckStatus is what the stuck-host tests read of status --json.
type stuckStatus struct {
	Head      uint64   `json:"head"`
	HWM       uint64   `json:"hwm"`
	Dirty     []string `json:"dirty"`
	Shadowed  []string `json:"shadowed"`
	Conflicts []string `json:"conflicts"`
}

func (c *shell) stuckStatus(cache string) stuckStatus {
	c.t.Helper()
	var st stuckStatus
	out := c.ok("--cache", cache, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		c.t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// converge is checkConverged (every cache, a fresh host and a rebuild hold
// identical files, hwm == head, nothing dirty), with no conflict left either,
// and every content in reachable — a (path, content) committed — in the
// ledger's tree at the head (replay), at its path or, when a directory of the
// same name shadows it, under .syncledger-shadowed/. It returns the tree.
func converge(t *testing.T, c *shell, caches []string, reachable map[string]string) map[string]string {
	t.Helper()
	checkConverged(c, caches)
	for _, cache := range caches {
		if st := c.stuckStatus(cache); len(st.Conflicts) > 0 {
			t.Fatalf("cache %s: conflicts %v", cache, st.Conflicts)
		}
	}
	fresh := t.TempDir()
	c.ok("--cache", fresh, "--host", "fresh", "sync")
	into := filepath.Join(t.TempDir(), "replay")
	c.ok("replay", "--to", itoa(c.stuckStatus(fresh).Head), "--into", into)
	replayed := tree(t, into)
	for p, content := range reachable {
		if replayed[p] != content && replayed[".syncledger-shadowed/"+url.PathEscape(p)] != content {
			t.Fatalf("committed %s=%q is not in the replayed tree: %v", p, content, replayed)
		}
	}
	return tree(t, fresh)
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestFileDirectoryClashCLI is #14 point 1: host a commits a file foo (partition
// _root) while host b commits foo/bar (partition foo); both are acknowledged.
// Every host, fresh ones and rebuilds included, applies one rule: the directory
// wins, the file foo is shadowed (status lists it, replay writes it under
// .syncledger-shadowed/) and comes back when the last path under it goes. A
// commit that would create the clash from the host's own view is refused
// naming both paths. The same under data/.
func TestFileDirectoryClashCLI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, under string }{
		{"foo", "foo/bar"},
		{"data/t/m/x", "data/t/m/x/y"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, "clash")
			c.ok("init", "--blobs", "file://"+t.TempDir())
			a, b := t.TempDir(), t.TempDir()
			ha := []string{"--cache", a, "--host", "a"}
			hb := []string{"--cache", b, "--host", "b"}
			c.ok(append(ha, "sync")...)
			c.ok(append(hb, "sync")...)

			put(t, a, tc.file, "a's file")
			c.ok(append(ha, "commit", "-m", "file")...)
			put(t, b, tc.under, "b's file under it")
			c.ok(append(hb, "commit", "-m", "directory")...) // b has not seen a's: both acknowledged

			for _, cache := range []string{a, b} {
				c.ok("--cache", cache, "sync")
			}
			if st := c.stuckStatus(a); !cmp.Equal(st.Shadowed, []string{tc.file}) {
				t.Fatalf("status shadowed %v, want [%s]", st.Shadowed, tc.file)
			}
			if out := c.ok("--cache", a, "status"); !strings.Contains(out, "shadowed") || !strings.Contains(out, tc.file) {
				t.Fatalf("status does not list the shadowed file:\n%s", out)
			}
			c.ok("snapshot") // the rebuilds restore a snapshot that holds the clash
			if out := c.ok("--cache", t.TempDir(), "--host", "restored", "rebuild", "--quiet"); !strings.Contains(out, "rebuilt from snapshot") {
				t.Fatalf("rebuild did not restore the snapshot: %s", out)
			}
			got := converge(t, c, []string{a, b}, map[string]string{tc.file: "a's file", tc.under: "b's file under it"})
			if got[tc.under] != "b's file under it" {
				t.Fatalf("the directory did not win: %v", got)
			}

			// The shadowed file comes back when the last path under it goes.
			if err := os.Remove(filepath.Join(b, tc.under)); err != nil {
				t.Fatal(err)
			}
			c.ok(append(hb, "commit")...)
			got = converge(t, c, []string{a, b}, nil)
			if d := cmp.Diff(map[string]string{tc.file: "a's file"}, got); d != "" {
				t.Fatalf("the shadowed file did not come back (-want +got):\n%s", d)
			}

			// A commit that would create the clash from the host's own view
			// is refused, naming both paths: b replaces the file by a
			// directory but commits only the directory's partition (the
			// file's deletion left out).
			if err := os.Remove(filepath.Join(b, tc.file)); err != nil {
				t.Fatal(err)
			}
			put(t, b, tc.under, "b's file again")
			r := c.run(append(hb, "commit", "--partition", partitionOf(tc.under))...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.file) || !strings.Contains(r.stderr, tc.under) {
				t.Fatalf("clashing commit: exit %d, want 1 naming %s and %s\n%s", r.code, tc.file, tc.under, r.stderr)
			}
			// The whole change (the directory, and the file's deletion) is fine.
			c.ok(append(hb, "commit", "-m", "directory replaces the file")...)
			got = converge(t, c, []string{a, b}, nil)
			if d := cmp.Diff(map[string]string{tc.under: "b's file again"}, got); d != "" {
				t.Fatalf("tree (-want +got):\n%s", d)
			}
		})
	}
}

// partitionOf returns the partition key of the test's paths (of 1, 2, 4 or 5
// segments; ledger.PartitionKey is the rule).
func partitionOf(path string) string {
	switch {
	case !strings.Contains(path, "/"):
		return "_root"
	case strings.HasPrefix(path, "data/"):
		return strings.ReplaceAll(path[:strings.LastIndexByte(path, '/')], "/", "--")
	}
	return path[:strings.IndexByte(path, '/')]
}

// TestReplaceFileByDirectoryCLI: one host replaces its own file …/raw by a
// directory …/raw/inner in one commit (two partitions). Other hosts — with
// the file in their cache, syncing scoped first, or fully — and fresh hosts
// follow.
func TestReplaceFileByDirectoryCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "replace")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b, s := t.TempDir(), t.TempDir(), t.TempDir()
	ha := []string{"--cache", a, "--host", "a"}
	put(t, a, "data/t/m/x/raw", "file")
	c.ok(append(ha, "commit")...)
	c.ok("--cache", b, "--host", "b", "sync")
	c.ok("--cache", s, "--host", "s", "sync")
	wc := t.TempDir() // a watch that holds the file when the directory replaces it
	w := startProc(t, c.env, "--cache", wc, "--host", "watcher", "watch")
	w.line(t, `^applied seq 1:`)

	if err := os.Remove(filepath.Join(a, "data/t/m/x/raw")); err != nil {
		t.Fatal(err)
	}
	put(t, a, "data/t/m/x/raw/inner", "inside")
	out := c.ok(append(ha, "commit", "--json")...)
	var cr struct{ Partitions []string }
	if err := json.Unmarshal([]byte(out), &cr); err != nil || len(cr.Partitions) != 2 {
		t.Fatalf("commit touched %v (%v), want two partitions", cr.Partitions, err)
	}
	w.line(t, `^applied seq 3:`) // the commit's two parts: seqs 2 and 3
	if code := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exit %d; stderr:\n%s", code, w.stderr)
	}
	// s reads the directory's partition alone first: the file is still in its
	// index, so for a while it is shadowed.
	c.ok("--cache", s, "--host", "s", "sync", "--partition", "data--t--m")
	if st := c.stuckStatus(s); !cmp.Equal(st.Shadowed, []string{"data/t/m/x/raw"}) {
		t.Fatalf("after the scoped sync: shadowed %v", st.Shadowed)
	}
	got := converge(t, c, []string{a, b, s, wc}, map[string]string{"data/t/m/x/raw/inner": "inside"})
	if d := cmp.Diff(map[string]string{"data/t/m/x/raw/inner": "inside"}, got); d != "" {
		t.Fatalf("tree (-want +got):\n%s", d)
	}
}

// TestResolveCLI is #14 point 2: both hosts edit one file; commit (exit 3)
// and sync (exit 3) each name both resolve command lines and status lists the
// conflict; resolve --theirs keeps this host's copy under
// .syncledger/conflicts/ and takes the ledger's; resolve --mine commits this
// host's version on top; --all takes every conflict.
func TestResolveCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "resolve")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	ha := []string{"--cache", a, "--host", "a"}
	hb := []string{"--cache", b, "--host", "b"}
	put(t, a, "p/shared", "v0")
	put(t, a, "q/other", "o0")
	c.ok(append(ha, "commit")...)
	c.ok(append(hb, "sync")...)

	clash := func(ours, theirs string) {
		t.Helper()
		put(t, a, "p/shared", theirs)
		c.ok(append(ha, "commit")...)
		put(t, b, "p/shared", ours)
	}
	wantHint := func(what string, r result) {
		t.Helper()
		if r.code != 3 || !strings.Contains(r.stderr, "syncledger resolve --mine p/shared") || !strings.Contains(r.stderr, "syncledger resolve --theirs p/shared") {
			t.Fatalf("%s: exit %d, want 3 naming both resolve commands\n%s", what, r.code, r.stderr)
		}
	}

	// --theirs
	clash("b1", "a1")
	wantHint("commit", c.run(append(hb, "commit")...))
	wantHint("sync", c.run(append(hb, "sync")...))
	if st := c.stuckStatus(b); !cmp.Equal(st.Conflicts, []string{"p/shared"}) {
		t.Fatalf("status conflicts %v", st.Conflicts)
	}
	if out := c.ok("--cache", b, "status"); !strings.Contains(out, "resolve --theirs") || !strings.Contains(out, "resolve --mine") {
		t.Fatalf("status names no resolve command:\n%s", out)
	}
	out := c.ok(append(hb, "resolve", "--theirs", "p/shared")...)
	kept, err := filepath.Glob(filepath.Join(b, ".syncledger", "conflicts", "*", "p", "shared"))
	if err != nil || len(kept) != 1 || !strings.Contains(out, filepath.Dir(filepath.Dir(kept[0]))) {
		t.Fatalf("resolve --theirs kept %v (%v); printed:\n%s", kept, err, out)
	}
	if bs, _ := os.ReadFile(kept[0]); string(bs) != "b1" {
		t.Fatalf("kept copy holds %q", bs)
	}
	if got := tree(t, b)["p/shared"]; got != "a1" {
		t.Fatalf("after --theirs: %q, want the ledger's a1", got)
	}
	converge(t, c, []string{a, b}, map[string]string{"p/shared": "a1"})

	// --mine
	clash("b2", "a2")
	c.ok(append(hb, "resolve", "--mine", "p/shared")...)
	got := converge(t, c, []string{a, b}, nil)
	if got["p/shared"] != "b2" {
		t.Fatalf("after --mine: %q, want b's b2", got["p/shared"])
	}

	// --all, with a local deletion among the conflicts.
	clash("b3", "a3")
	put(t, a, "q/other", "o1")
	c.ok(append(ha, "commit")...)
	if err := os.Remove(filepath.Join(b, "q/other")); err != nil {
		t.Fatal(err)
	}
	if st := c.stuckStatus(b); !cmp.Equal(st.Conflicts, []string{"p/shared", "q/other"}) {
		t.Fatalf("status conflicts %v", st.Conflicts)
	}
	c.ok(append(hb, "resolve", "--mine", "--all")...)
	got = converge(t, c, []string{a, b}, nil)
	if _, ok := got["q/other"]; got["p/shared"] != "b3" || ok {
		t.Fatalf("after --mine --all: %v", got)
	}
	if r := c.run(append(hb, "resolve", "--theirs")...); r.code != 2 {
		t.Fatalf("resolve without paths: exit %d, want 2", r.code)
	}
	if r := c.run(append(hb, "resolve", "--theirs", "p/shared")...); r.code != 1 || !strings.Contains(r.stderr, "no uncommitted change") || !strings.Contains(r.stderr, "'syncledger status' lists conflicts") {
		t.Fatalf("resolve of a clean path: exit %d, want 1 saying so\n%s", r.code, r.stderr)
	}
	if out := c.ok(append(hb, "resolve", "--theirs", "--all")...); !strings.Contains(out, "no conflicts") {
		t.Fatalf("resolve --all with none: %s", out)
	}
}

// TestSyncUnknownModelCLI is #14 point 9: a scoped sync of a model no commit
// touched says so (exit 1) instead of "up to date".
func TestSyncUnknownModelCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "model")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a := t.TempDir()
	put(t, a, "data/command/shell/vpc/result/1/raw", "x")
	c.ok("--cache", a, "--host", "a", "commit")
	for _, args := range [][]string{
		{"--model", "command/shell:nosuch"},
		{"--model", "command/shell:vpc", "--model", "command/shell:nosuch"},
	} {
		r := c.run(append([]string{"--cache", a, "--host", "a", "sync"}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "command/shell:nosuch") || !strings.Contains(r.stderr, "no such model") {
			t.Fatalf("sync %v: exit %d, want 1 naming the model\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	c.ok("--cache", a, "--host", "a", "sync", "--model", "command/shell:vpc")
}

// TestUncommittedDirectoryBlocksFileCLI: this host made foo/bar and did not
// commit it when another host's file foo arrives. The sync stops naming
// foo/bar (exit 3) with its ways out, each of which converges: commit it (the
// two race: the directory wins), or take the ledger's side (foo/bar moved to
// .syncledger/conflicts/).
func TestUncommittedDirectoryBlocksFileCLI(t *testing.T) {
	t.Parallel()
	for _, way := range []string{"commit", "resolve --theirs"} {
		t.Run(way, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, "blocked")
			c.ok("init", "--blobs", "file://"+t.TempDir())
			a, b := t.TempDir(), t.TempDir()
			hb := []string{"--cache", b, "--host", "b"}
			c.ok(append(hb, "sync")...)
			put(t, a, "foo", "a's file")
			c.ok("--cache", a, "--host", "a", "commit")
			put(t, b, "foo/bar", "b's uncommitted file")
			r := c.run(append(hb, "sync")...)
			if r.code != 3 || !strings.Contains(r.stderr, "foo/bar") || !strings.Contains(r.stderr, "resolve --theirs foo/bar") {
				t.Fatalf("sync: exit %d, want 3 naming foo/bar and its way out\n%s", r.code, r.stderr)
			}
			want := map[string]string{"foo": "a's file"}
			if way == "commit" {
				c.ok(append(hb, "commit")...)
				want = map[string]string{"foo/bar": "b's uncommitted file"}
			} else {
				c.ok(append(hb, "resolve", "--theirs", "foo/bar")...)
			}
			got := converge(t, c, []string{a, b}, map[string]string{"foo": "a's file"})
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("tree (-want +got):\n%s", d)
			}
		})
	}
}

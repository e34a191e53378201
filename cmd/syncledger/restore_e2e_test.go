package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger/natsjs"
)

// forkStatus is what status --json says of a forked cache.
type forkStatus struct {
	Head, HWM, Behind uint64
	Dirty             []string
	Forked            *struct {
		Seq       uint64
		Want, Got string
	}
}

func forkOf(t *testing.T, c *shell, cache string) forkStatus {
	t.Helper()
	var st forkStatus
	out := c.ok("--cache", cache, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// keptIn returns the files under a cache's conflicts directory, by path
// relative to their <time> directory.
func keptIn(t *testing.T, cache string) map[string]string {
	t.Helper()
	out := map[string]string{}
	base := filepath.Join(cache, ".syncledger", "conflicts")
	stamps, _ := os.ReadDir(base)
	for _, st := range stamps {
		for p, c := range tree(t, filepath.Join(base, st.Name())) {
			out[p] = c
		}
	}
	return out
}

// TestBackupRestoreCLI is issue 39's restore as an admin does it now: a
// backup (the log, the NATS object store of the blobs, the buckets), three
// hosts' commits after it, a restore (refused over the ledger without
// --replace; with it, the ledger first backed up), more commits — one at the
// path of a lost one. Every host detects the fork (status says FORKED, a
// commit refuses with 'syncledger sync' as its way out, never quarantine),
// its sync republishes what it holds, and all converge with every run any of
// them held: in the ledger, or kept under conflicts/ where the ledger holds
// another at its path.
func TestBackupRestoreCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "bk")
	c.ok("init") // blobs in the NATS object store syncledger-bk: in the backup
	a, b, x := t.TempDir(), t.TempDir(), t.TempDir()
	host := func(cache, name string, args ...string) []string {
		return append([]string{"--cache", cache, "--host", name}, args...)
	}
	put(t, a, "audit/a.jsonl", "before")
	c.ok(host(a, "a", "commit", "-m", "before the backup")...)
	for _, h := range []string{b, x} {
		c.ok(host(h, filepath.Base(h), "sync")...)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	out := c.ok("backup", dir)
	if !strings.Contains(out, "backed up ledger bk") || !strings.Contains(out, "objects") || !strings.Contains(out, "OBJ_syncledger-bk") {
		t.Fatalf("backup:\n%s", out)
	}

	put(t, a, "data/t/m/one/1/raw", "a's run, after the backup")
	c.ok(host(a, "a", "commit", "-m", "a's run")...)
	c.ok(host(b, "b", "sync")...)
	put(t, b, "data/t/m/two/1/raw", "b's run, after the backup")
	c.ok(host(b, "b", "commit", "-m", "b's run")...)
	put(t, x, "data/t/m/three/1/raw", "x's run, after the backup")
	c.ok(host(x, "x", "commit", "-m", "x's run")...)

	if r := c.run("restore", dir); r.code == 0 || !strings.Contains(r.stderr, "--replace") {
		t.Fatalf("restore over the ledger without --replace: %+v", r)
	}
	keep := filepath.Join(t.TempDir(), "replaced")
	out = c.ok("restore", dir, "--replace", "--keep", keep)
	if !strings.Contains(out, "restored ledger bk") || !strings.Contains(out, "backed up in "+keep) {
		t.Fatalf("restore:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(keep, "backup.json")); err != nil {
		t.Fatalf("the replaced ledger was not backed up: %v", err)
	}

	// x's status is forked, never "behind 0"; its commit refuses.
	if st := forkOf(t, c, x); st.Forked == nil {
		t.Fatalf("x's status after the restore: %+v; want forked", st)
	}
	put(t, x, "audit/x.jsonl", "x's edit")
	r := c.run(host(x, "x", "commit", "-m", "on the fork")...)
	if r.code == 0 || !strings.Contains(r.stderr, "way out: syncledger sync") || strings.Contains(r.stderr, "quarantine") {
		t.Fatalf("x's commit on the fork: %+v", r)
	}
	// A new host writes at the path of a's lost run.
	n := t.TempDir()
	c.ok(host(n, "n", "sync")...)
	put(t, n, "data/t/m/one/1/raw", "n's run, on the restored ledger")
	c.ok(host(n, "n", "commit", "-m", "n's run")...)

	for _, h := range []struct{ cache, name string }{{b, "b"}, {a, "a"}, {x, "x"}} {
		out := c.ok(host(h.cache, h.name, "sync")...)
		if !strings.Contains(out, "the ledger lost commits this cache applied") || strings.Contains(out, "up to date") {
			t.Fatalf("%s's sync after the restore:\n%s", h.name, out)
		}
	}
	c.ok(host(x, "x", "commit", "-m", "x's edit")...) // its local edit went back uncommitted
	for _, h := range []struct{ cache, name string }{{n, "n"}, {a, "a"}, {b, "b"}, {x, "x"}} {
		c.ok(host(h.cache, h.name, "sync")...)
	}
	want := map[string]string{
		"audit/a.jsonl":        "before",
		"audit/x.jsonl":        "x's edit",
		"data/t/m/one/1/raw":   "n's run, on the restored ledger",
		"data/t/m/two/1/raw":   "b's run, after the backup",
		"data/t/m/three/1/raw": "x's run, after the backup",
	}
	for _, h := range []string{a, b, x, n} {
		if diff := cmp.Diff(want, tree(t, h)); diff != "" {
			t.Fatalf("cache %s (-want +got):\n%s", h, diff)
		}
		if st := forkOf(t, c, h); st.Forked != nil || len(st.Dirty) != 0 || st.HWM != st.Head {
			t.Fatalf("cache %s after the heal: %+v", h, st)
		}
	}
	// a's run: kept by the hosts that held it, where the ledger holds n's.
	for _, h := range []string{a, b} {
		if got := keptIn(t, h)["data/t/m/one/1/raw"]; got != "a's run, after the backup" {
			t.Fatalf("a's run kept in %s: %q", h, got)
		}
	}
}

// TestHotCopyRestoreCLI is issue 39's exact sequence: a copy of serve's data
// directory (the stream, the file blob store beside it) taken, more commits,
// the copy put back (not through 'syncledger restore'), then new commits until
// the head is again the HWM of a host that synced the lost history. Every
// host detects the fork — that one too, where seqs alone said "up to date" —
// none deletes anything, and they converge by republishing.
func TestHotCopyRestoreCLI(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	srv, url, _ := serveT(t, data)
	env := func(url string) *shell {
		return &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+url, "SYNCLEDGER_LOG_LEVEL=warn")}
	}
	c := env(url)
	a, b, n := t.TempDir(), t.TempDir(), t.TempDir()
	host := func(cache, name string, args ...string) []string {
		return append([]string{"--cache", cache, "--host", name}, args...)
	}
	put(t, a, "audit/a.jsonl", "before")
	c.ok(host(a, "a", "commit", "-m", "before")...)
	c.ok(host(n, "n", "sync")...)
	stop := func() {
		t.Helper()
		if code := srv.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	}
	stop()
	copyDir := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", data, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("copy the data directory: %v\n%s", err, out)
	}
	srv, url, _ = serveT(t, data)
	c = env(url)
	for i, content := range []string{"a's first run", "a's second run"} {
		put(t, a, "data/t/m/one/"+string(rune('1'+i))+"/raw", content)
		c.ok(host(a, "a", "commit", "-m", content)...)
	}
	c.ok(host(b, "b", "sync")...) // b's HWM: the lost head
	lost := forkOf(t, c, b).HWM

	stop()
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(copyDir, data); err != nil {
		t.Fatal(err)
	}
	srv, url, _ = serveT(t, data)
	c = env(url)
	for i := 0; ; i++ {
		put(t, n, "audit/n.jsonl", "n's line "+string(rune('a'+i)))
		c.ok(host(n, "n", "commit", "-m", "n")...)
		if st := forkOf(t, c, n); st.Head >= lost {
			if st.Head != lost {
				t.Fatalf("the head passed b's HWM %d: %d", lost, st.Head)
			}
			break
		}
	}
	st := forkOf(t, c, b)
	if st.Forked == nil || st.Head != st.HWM {
		t.Fatalf("b's status with head == its HWM on the restored server: %+v; want forked", st)
	}
	out := c.ok(host(b, "b", "sync")...)
	if strings.Contains(out, "up to date") || !strings.Contains(out, "republished") {
		t.Fatalf("b's sync at head == HWM on the restored server:\n%s", out)
	}
	out = c.ok(host(a, "a", "sync")...)
	if !strings.Contains(out, "the ledger lost commits this cache applied") {
		t.Fatalf("a's sync:\n%s", out)
	}
	for _, h := range []struct{ cache, name string }{{n, "n"}, {a, "a"}, {b, "b"}} {
		c.ok(host(h.cache, h.name, "sync")...)
	}
	want := tree(t, n)
	if want["data/t/m/one/1/raw"] != "a's first run" || want["data/t/m/one/2/raw"] != "a's second run" {
		t.Fatalf("the runs made after the copy, on the restored server: %v", want)
	}
	for _, h := range []string{a, b} {
		if diff := cmp.Diff(want, tree(t, h)); diff != "" {
			t.Fatalf("cache %s differs from n's (-n +%s):\n%s", h, h, diff)
		}
	}
}

// TestBackupRestoreRolesCLI: backup and restore are the admin's — a host's
// and tooling's are refused, naming the permission, and change nothing — and
// restore makes the ledger as this release makes it: a backup whose swamp
// bucket takes roll-ups (as a release before issue 38 made it) comes back
// hardened (the upgrade's configuration), the commits with it.
func TestBackupRestoreRolesCLI(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	cache := filepath.Join(r.dir, "web-1")
	put(t, cache, "audit/a", "a")
	r.ok(r.host, "--cache", cache, "commit", "-m", "one")
	admin := r.attacker("admin")
	swampStream := "KV_" + natsjs.SwampBucket(rigLedger)
	rollups := func() bool {
		t.Helper()
		s, err := admin.js.Stream(ctx, swampStream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.AllowRollup
	}
	s, err := admin.js.Stream(ctx, swampStream)
	if err != nil {
		t.Fatal(err)
	}
	old := s.CachedInfo().Config
	old.AllowRollup = true
	if _, err := admin.js.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	for _, who := range []struct {
		name string
		env  []string
	}{{"host", r.host}, {"tooling", r.tool}} {
		if res := cli(t, who.env, "backup", dir); res.code == 0 || !strings.Contains(res.stderr, "permission") {
			t.Fatalf("%s's backup: %+v; want refused for permission", who.name, res)
		}
		if _, err := os.Stat(filepath.Join(dir, "backup.json")); err == nil {
			t.Fatalf("%s's refused backup left a backup.json", who.name)
		}
	}
	r.ok(r.admin, "backup", dir)
	put(t, cache, "audit/b", "b")
	r.ok(r.host, "--cache", cache, "commit", "-m", "after the backup")
	for _, who := range []struct {
		name string
		env  []string
	}{{"host", r.host}, {"tooling", r.tool}} {
		if res := cli(t, who.env, "restore", dir, "--replace", "--keep", filepath.Join(t.TempDir(), "kept")); res.code == 0 || !strings.Contains(res.stderr, "permission") {
			t.Fatalf("%s's restore: %+v; want refused for permission", who.name, res)
		}
	}
	if out := r.ok(r.host, "--cache", cache, "sync"); !strings.Contains(out, "up to date") {
		t.Fatalf("the host's sync after refused restores:\n%s", out)
	}
	if !rollups() {
		t.Fatal("the swamp bucket changed by refused restores")
	}
	r.ok(r.admin, "restore", dir, "--replace", "--keep", filepath.Join(t.TempDir(), "kept"))
	if rollups() {
		t.Fatal("the restored swamp bucket still takes roll-ups: restore did not make it as this release does")
	}
	// The host heals: its commit after the backup is republished.
	if out := r.ok(r.host, "--cache", cache, "sync"); !strings.Contains(out, "the ledger lost commits this cache applied") {
		t.Fatalf("the host's sync after the restore:\n%s", out)
	}
	fresh := filepath.Join(r.dir, "fresh")
	r.ok(r.host, "--cache", fresh, "--host", "fresh", "sync")
	if got := tree(t, fresh); got["audit/a"] != "a" || got["audit/b"] != "b" {
		t.Fatalf("a fresh host after the restore and the heal holds %v", got)
	}
}

// TestRestoreFailsAtObjectsCLI: the object store's archive is the one the
// server refuses, so a restore fails with the ledger's log as it was and its
// object store gone. The printed way out — restore the kept backup — must
// converge from there: its own backup of what it replaces takes what there is
// (the log; the object store recorded as missing) instead of refusing, and
// the ledger comes back as it was; the hosts read every file again.
func TestRestoreFailsAtObjectsCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "bobj")
	c.ok("init") // blobs in the NATS object store syncledger-bobj: in the backup
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "audit/a.jsonl", "before")
	c.ok("--cache", a, "--host", "a", "commit", "-m", "before the backup")
	dir := filepath.Join(t.TempDir(), "backup")
	c.ok("backup", dir)
	put(t, a, "data/t/m/one/1/raw", "a's run, after the backup")
	c.ok("--cache", a, "--host", "a", "commit", "-m", "a's run")
	damageArchive(t, dir, "OBJ_syncledger-bobj", true)

	kept := filepath.Join(t.TempDir(), "kept")
	res := c.run("restore", dir, "--replace", "--keep", kept)
	if res.code == 0 || !strings.Contains(res.stderr, "the server holds part of the backup") {
		t.Fatalf("restore whose object store the server refuses: %+v", res)
	}
	ways := wayOuts(t, res.stderr)
	if len(ways) != 1 {
		t.Fatalf("%d ways out, want 1:\n%s", len(ways), res.stderr)
	}
	out := c.ok(ways[0]...)
	if !strings.Contains(out, "restored ledger bobj") || !strings.Contains(out, "partial: the server held no stream OBJ_syncledger-bobj") {
		t.Fatalf("the way out %v:\n%s", ways[0], out)
	}
	c.ok("--cache", b, "--host", "b", "sync")
	for p, want := range map[string]string{"audit/a.jsonl": "before", "data/t/m/one/1/raw": "a's run, after the backup"} {
		if got := tree(t, b)[p]; got != want {
			t.Fatalf("a new host after the way out: %s = %q, want %q", p, got, want)
		}
	}
	if out := c.ok("--cache", a, "--host", "a", "sync"); !strings.HasPrefix(out, "up to date (hwm 2") {
		t.Fatalf("a after the way out:\n%s", out)
	}
}

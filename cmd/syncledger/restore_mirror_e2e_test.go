package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// restoreMirrorRig is a ledger on the origin of two regions with its mirror
// (mirror create), a host A at the origin and a host B of region B reading
// through the mirror, a backup taken after A's first commit, then a commit
// from each region: the commits a restore loses.
type restoreMirrorRig struct {
	*regionsCLI
	ca, cb, dir string   // A's and B's caches, the backup
	admin       []string // the admin's environment for mirror create
}

func at(cache, name string, args ...string) []string {
	return append([]string{"--cache", cache, "--host", name}, args...)
}

func newRestoreMirrorRig(t *testing.T, name string) *restoreMirrorRig {
	t.Helper()
	r := &restoreMirrorRig{regionsCLI: newRegionsCLI(t, name), ca: t.TempDir(), cb: t.TempDir(), dir: filepath.Join(t.TempDir(), "backup")}
	r.admin = []string{"SYNCLEDGER_READ_NATS=" + r.r.Mirror.ClientURL()}
	if res := r.origin.runEnv(r.admin, "mirror", "create"); res.code != 0 {
		t.Fatalf("mirror create: %+v", res)
	}
	put(t, r.ca, "audit/a.jsonl", "before the backup")
	r.origin.ok(at(r.ca, "a", "commit", "-m", "before")...)
	r.caughtUp(1)
	r.b.ok(at(r.cb, "b", "sync")...)
	if out := r.origin.ok("backup", r.dir); !strings.Contains(out, "backed up ledger "+name) {
		t.Fatalf("backup:\n%s", out)
	}
	put(t, r.ca, "data/t/m/one/1/raw", "a's run, after the backup")
	r.origin.ok(at(r.ca, "a", "commit", "-m", "a's run")...)
	r.caughtUp(2)
	r.b.ok(at(r.cb, "b", "sync")...)
	put(t, r.cb, "data/t/m/two/1/raw", "b's run, after the backup")
	r.b.ok(at(r.cb, "b", "commit", "-m", "b's run")...)
	r.caughtUp(3)
	r.origin.ok(at(r.ca, "a", "sync")...)
	return r
}

// converge heals both hosts, commits once more from each region, and checks
// that both caches hold every run, that the mirror serves the origin's
// history (the log read through it is the origin's, event for event), and
// that a new host of region B gets the same files.
func (r *restoreMirrorRig) converge(t *testing.T, extra map[string]string) {
	t.Helper()
	if out := r.b.ok(at(r.cb, "b", "sync")...); !strings.Contains(out, "the ledger lost commits this cache applied") {
		t.Fatalf("B's sync through the mirror after the restore:\n%s", out)
	}
	if out := r.origin.ok(at(r.ca, "a", "sync")...); !strings.Contains(out, "the ledger lost commits this cache applied") {
		t.Fatalf("A's sync after the restore:\n%s", out)
	}
	put(t, r.ca, "data/t/m/one/2/raw", "a's run, after the restore")
	r.origin.ok(at(r.ca, "a", "commit", "-m", "a's second run")...)
	put(t, r.cb, "data/t/m/two/2/raw", "b's run, after the restore")
	r.b.ok(at(r.cb, "b", "commit", "-m", "b's second run")...)
	r.origin.ok(at(r.ca, "a", "sync")...)
	r.caughtUp(r.origin.status(r.ca).Head)
	r.b.ok(at(r.cb, "b", "sync")...)
	want := map[string]string{
		"audit/a.jsonl":      "before the backup",
		"data/t/m/one/1/raw": "a's run, after the backup",
		"data/t/m/two/1/raw": "b's run, after the backup",
		"data/t/m/one/2/raw": "a's run, after the restore",
		"data/t/m/two/2/raw": "b's run, after the restore",
	}
	maps.Copy(want, extra)
	for _, h := range []struct {
		sh    *shell
		cache string
	}{{r.origin, r.ca}, {r.b, r.cb}} {
		if diff := cmp.Diff(want, tree(t, h.cache)); diff != "" {
			t.Fatalf("cache %s (-want +got):\n%s", h.cache, diff)
		}
		if st := h.sh.status(h.cache); st.HWM != st.Head || len(st.Dirty) != 0 {
			t.Fatalf("cache %s after the heal: %+v", h.cache, st)
		}
	}
	if got, want := r.b.ok("log", "--json"), r.origin.ok("log", "--json"); got != want {
		t.Fatalf("the log read through the mirror differs from the origin's:\n%s\nthe origin's:\n%s", got, want)
	}
	fresh := t.TempDir()
	r.b.ok(at(fresh, "fresh", "sync")...)
	if diff := cmp.Diff(want, tree(t, fresh)); diff != "" {
		t.Fatalf("a new host of region B (-want +got):\n%s", diff)
	}
}

// TestRestoreRecreatesMirrorCLI (issue 39: restore recreates mirrors): a
// ledger with a mirror in another region, a backup, a commit from each
// region, a restore. The restore finds the mirror in the origin's record,
// makes it anew (a mirror never copies a seq it holds again: left alone it
// would serve the lost commits at their seqs — TestMirrorAfterRestore), and
// says so; the host reading through the mirror and the origin's host heal,
// commit again and converge with every run, and the log read through the
// mirror is the origin's.
func TestRestoreRecreatesMirrorCLI(t *testing.T) {
	t.Parallel()
	r := newRestoreMirrorRig(t, "rmirror")
	out := r.origin.ok("restore", r.dir, "--replace", "--keep", filepath.Join(t.TempDir(), "kept"))
	if !strings.Contains(out, "mirror in domain eu: made anew") {
		t.Fatalf("restore does not say it made the mirror anew:\n%s", out)
	}
	r.converge(t, nil)
}

// TestRestoreMirrorUnreachableCLI: the mirror's region is cut off during the
// restore. The origin is restored all the same (exit 0); restore warns that
// the mirror was not made anew and prints the command that does; once the
// region is back, that command, run as printed, makes it anew, and the
// hosts converge as above.
func TestRestoreMirrorUnreachableCLI(t *testing.T) {
	t.Parallel()
	r := newRestoreMirrorRig(t, "rmcut")
	r.r.Link.SetRefusing(true)
	r.r.Link.DropAll()
	res := r.origin.run("restore", r.dir, "--replace", "--keep", filepath.Join(t.TempDir(), "kept"))
	if res.code != 0 || !strings.Contains(res.stdout, "restored ledger rmcut") {
		t.Fatalf("restore with the mirror's region cut off: %+v", res)
	}
	_, cmdline, ok := strings.Cut(res.stderr, "run:\n")
	cmdline = strings.TrimSpace(strings.SplitN(cmdline, "\n", 2)[0])
	want := "syncledger --nats " + r.r.Origin.ClientURL() + " --read-nats " + r.r.Mirror.ClientURL() + " --ledger rmcut mirror create --replace --replicas 1"
	if !ok || !strings.Contains(res.stderr, "the mirror in domain eu was not made anew") || cmdline != want {
		t.Fatalf("restore's warning:\n%s\nwant the command %q", res.stderr, want)
	}
	r.r.Link.SetRefusing(false)
	r.r.WaitLinked(t)
	// Until the admin runs it, B's commit through the stale mirror is
	// refused (the origin's check finds the mirror stale, or the fork at
	// B's mark read from the origin), and its file is kept.
	put(t, r.cb, "audit/b.jsonl", "b's edit on the stale mirror")
	if res := r.b.run(at(r.cb, "b", "commit", "-m", "on the stale mirror")...); res.code == 0 {
		t.Fatalf("B's commit through the stale mirror: %+v", res)
	}

	if got := tree(t, r.cb)["audit/b.jsonl"]; got != "b's edit on the stale mirror" {
		t.Fatalf("B's refused commit's file: %q", got)
	}
	var st struct {
		Stale string `json:"stale"`
	}
	decodeJSON(t, "mirror status", r.b.ok("mirror", "status", "--json"), &st)
	if !strings.Contains(st.Stale, "before the origin's restore") {
		t.Fatalf("mirror status of the stale mirror: %+v", st)
	}
	args := strings.Fields(cmdline)[1:]
	if out := r.origin.ok(args...); !strings.Contains(out, "deleted and made anew") {
		t.Fatalf("%s:\n%s", cmdline, out)
	}
	st.Stale = ""
	decodeJSON(t, "mirror status", r.b.ok("mirror", "status", "--json"), &st)
	if st.Stale != "" {
		t.Fatalf("mirror status of the mirror made anew: %+v", st)
	}
	r.converge(t, map[string]string{"audit/b.jsonl": "b's edit on the stale mirror"})
}

// TestMirrorPromoteCLI is docs/ops.md's failover when the origin's region is
// lost: a commit the mirror never copied (the link stalled), then region B
// cut off from the origin for good. The admin promotes the mirror in place
// (mirror promote, --nats region B's server); B's host, pointed there, goes on
// and commits; A's host, whose commit the mirror lacks, finds the ledger
// rewound there and heals; both converge with every run.
func TestMirrorPromoteCLI(t *testing.T) {
	t.Parallel()
	r := newRestoreMirrorRig(t, "promo")
	r.r.Link.Stall(true, true)
	put(t, r.ca, "data/t/m/one/2/raw", "a's run the mirror never copied")
	r.origin.ok(at(r.ca, "a", "commit", "-m", "uncopied")...)
	r.r.Link.SetRefusing(true)
	r.r.Link.DropAll()
	r.r.Far.SetRefusing(true)
	r.r.Far.DropAll()

	onB := &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+r.r.Mirror.ClientURL(), "SYNCLEDGER_LEDGER=promo", "SYNCLEDGER_LOG_LEVEL=warn")}
	if res := onB.run("mirror", "promote", "--read-nats", r.r.Mirror.ClientURL()); res.code == 0 {
		t.Fatalf("mirror promote with --read-nats: %+v", res)
	}
	out := onB.ok("mirror", "promote")
	if !strings.Contains(out, "the mirror is its stream now, at seq 3") {
		t.Fatalf("mirror promote:\n%s", out)
	}
	if res := onB.run("mirror", "promote"); res.code == 0 || !strings.Contains(res.stderr, "nothing to promote") {
		t.Fatalf("mirror promote again: %+v", res)
	}
	// B's host, pointed at the new origin, commits; A's heals there.
	put(t, r.cb, "data/t/m/two/2/raw", "b's run on the promoted mirror")
	onB.ok(at(r.cb, "b", "commit", "-m", "b's second run")...)
	if out := onB.ok(at(r.ca, "a", "sync")...); !strings.Contains(out, "the ledger lost commits this cache applied") {
		t.Fatalf("A's sync on the promoted mirror:\n%s", out)
	}
	onB.ok(at(r.cb, "b", "sync")...)
	want := map[string]string{
		"audit/a.jsonl":      "before the backup",
		"data/t/m/one/1/raw": "a's run, after the backup",
		"data/t/m/two/1/raw": "b's run, after the backup",
		"data/t/m/one/2/raw": "a's run the mirror never copied",
		"data/t/m/two/2/raw": "b's run on the promoted mirror",
	}
	for _, cache := range []string{r.ca, r.cb} {
		if diff := cmp.Diff(want, tree(t, cache)); diff != "" {
			t.Fatalf("cache %s (-want +got):\n%s", cache, diff)
		}
		if st := onB.status(cache); st.HWM != st.Head || len(st.Dirty) != 0 {
			t.Fatalf("cache %s: %+v", cache, st)
		}
	}
}

// damageArchive overwrites the archive of stream in the backup dir; with
// undetected, its size and digest in backup.json are rewritten to match, a
// damage no check of the files can see (as a server whose snapshot was bad
// when it was taken would leave).
func damageArchive(t *testing.T, dir, stream string, undetected bool) {
	t.Helper()
	file := filepath.Join(dir, stream+".arc.s2")
	bad := []byte("not an archive")
	if err := os.WriteFile(file, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if !undetected {
		return
	}
	var desc map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, "backup.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &desc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range desc["streams"].([]any) {
		if s := s.(map[string]any); s["stream"] == stream {
			sum := sha256.Sum256(bad)
			s["bytes"], s["sha256"], found = len(bad), hex.EncodeToString(sum[:]), true
		}
	}
	if !found {
		t.Fatalf("backup.json has no stream %s: %s", stream, raw)
	}
	raw, _ = json.Marshal(desc)
	if err := os.WriteFile(filepath.Join(dir, "backup.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreDamagedBackupCLI: a backup one of whose archives was damaged
// since it was taken is refused before anything changes — the ledger, its
// mirror and the hosts go on as they were.
func TestRestoreDamagedBackupCLI(t *testing.T) {
	t.Parallel()
	r := newRestoreMirrorRig(t, "rdamaged")
	damageArchive(t, r.dir, "KV_SYNCLEDGER_SWAMP_rdamaged", false)
	res := r.origin.run("restore", r.dir, "--replace", "--keep", filepath.Join(t.TempDir(), "kept"))
	if res.code == 0 || !strings.Contains(res.stderr, "KV_SYNCLEDGER_SWAMP_rdamaged.arc.s2 has 14 bytes") || !strings.Contains(res.stderr, "nothing was changed") {
		t.Fatalf("restore of a damaged backup: %+v", res)
	}
	var st mirrorStatus
	decodeJSON(t, "mirror status", r.b.ok("mirror", "status", "--json"), &st)
	if st.Mirror.Seq != 3 || st.Origin == nil || st.Origin.Seq != 3 {
		t.Fatalf("mirror status after the refused restore: %+v", st)
	}
	if out := r.b.ok(at(r.cb, "b", "sync")...); !strings.HasPrefix(out, "up to date (hwm 3") {
		t.Fatalf("B's sync after the refused restore:\n%s", out)
	}
}

// TestRestoreFailsPartWayCLI: a restore that fails after the log came back
// and the mirror was deleted (an archive damaged in a way no check of the
// files sees, so the server refuses it) says so — the server holds part of the
// backup, the mirror deleted, where the replaced ledger is kept — and prints
// the way out; followed as printed, it brings the ledger back as it was with
// its mirror made anew, and both regions' hosts go on as before.
func TestRestoreFailsPartWayCLI(t *testing.T) {
	t.Parallel()
	r := newRestoreMirrorRig(t, "rpart")
	damageArchive(t, r.dir, "KV_SYNCLEDGER_SWAMP_rpart", true)
	kept := filepath.Join(t.TempDir(), "kept")
	res := r.origin.run("restore", r.dir, "--replace", "--keep", kept)
	if res.code == 0 || !strings.Contains(res.stderr, "the server holds part of the backup") ||
		!strings.Contains(res.stderr, "mirrors (domain eu) were deleted first") || !strings.Contains(res.stderr, "backed up in "+kept) {
		t.Fatalf("restore of a damaged backup: %+v", res)
	}
	ways := wayOuts(t, res.stderr)
	if len(ways) != 1 {
		t.Fatalf("restore of a damaged backup prints %d ways out, want 1:\n%s", len(ways), res.stderr)
	}
	if out := r.origin.ok(ways[0]...); !strings.Contains(out, "restored ledger rpart") || !strings.Contains(out, "mirror in domain eu: made anew") {
		t.Fatalf("the way out %v:\n%s", ways[0], out)
	}
	r.caughtUp(3)
	put(t, r.cb, "data/t/m/two/2/raw", "b's run, after the way out")
	r.b.ok(at(r.cb, "b", "commit", "-m", "b again")...)
	r.origin.ok(at(r.ca, "a", "sync")...)
	if got := tree(t, r.ca)["data/t/m/two/2/raw"]; got != "b's run, after the way out" {
		t.Fatalf("a after b's commit: %q", got)
	}
	for _, p := range []string{"data/t/m/one/1/raw", "data/t/m/two/1/raw"} {
		if tree(t, r.ca)[p] == "" || tree(t, r.cb)[p] == "" {
			t.Fatalf("%s is missing after the way out: a %v, b %v", p, tree(t, r.ca), tree(t, r.cb))
		}
	}
}

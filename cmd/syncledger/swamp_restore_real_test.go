package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// whoRun is the swamp model whose every run writes something of its own:
// the host and the time, in nanoseconds.
const whoRun = `echo "run on $(basename $PWD) at $(date +%s%N)"`

var runRE = regexp.MustCompile(`run on [a-z-]+ at [0-9]+`)

// runsOf returns the runs of who's result a cache holds, by version
// directory: what each version's raw says (the cache synced in full, not
// lazily, holds every raw).
func (w *realSwamp) runsOf(repo string) map[string]string {
	w.t.Helper()
	out := map[string]string{}
	dir := filepath.Join(w.cache(repo), "data", "command", "shell", modelID(w.t, w.template, "who"), "result")
	des, err := os.ReadDir(dir)
	if err != nil {
		w.t.Fatalf("%s: %v", repo, err)
	}
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name(), "raw"))
		if err != nil {
			w.t.Fatalf("%s: version %s of who's result: %v", filepath.Base(repo), de.Name(), err)
		}
		out[de.Name()] = runRE.FindString(string(b))
	}
	return out
}

// checkRuns fails unless every repo holds every run of want, each once, and
// the same versions as the others.
func (w *realSwamp) checkRuns(want []string, repos ...string) {
	w.t.Helper()
	var first map[string]string
	for _, r := range repos {
		got := w.runsOf(r)
		seen := map[string]int{}
		for _, run := range got {
			seen[run]++
		}
		for _, run := range want {
			if seen[run] != 1 {
				w.t.Errorf("%s holds run %q %d times, want once: %v", filepath.Base(r), run, seen[run], got)
			}
		}
		if first == nil {
			first = got
		} else if !mapsEqual(first, got) {
			w.t.Errorf("%s's versions of who's result differ from %s's:\n%v\n%v", filepath.Base(r), filepath.Base(repos[0]), got, first)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// allRuns returns the runs of repos, each once, sorted.
func (w *realSwamp) allRuns(repos ...string) []string {
	w.t.Helper()
	var out []string
	for _, r := range repos {
		for _, run := range w.runsOf(r) {
			if run != "" && !slices.Contains(out, run) {
				out = append(out, run)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestSwampRealRestore is issue 39's restore made a first-class operation,
// through the real swamp CLI: a backup (syncledger backup), runs from three
// hosts after it, the ledger restored (syncledger restore --replace), more
// runs — one from a new host whose version numbers are those of lost runs.
// The hosts need nothing but their next swamp command: each republishes what
// it holds, renumbered past the ledger's where the numbers were taken since,
// and every host ends with every run, once.
func TestSwampRealRestore(t *testing.T) {
	w := newRealSwampWorld(t)
	w.model("who", whoRun)
	srv, _ := natsjstest.RunServer(t)
	w.srv = srv
	w.start(srv.ClientURL())
	w.c.ok("init", "--blobs", fileURL(filepath.Join(w.dir, "blobs"))) // outside NATS: listed, not copied
	a, b, c := w.repo("host-a"), w.repo("host-b"), w.repo("host-c")
	w.mustSwamp(a, "model", "method", "run", "who", "execute")
	w.mustSwamp(b, "model", "method", "run", "who", "execute")
	w.mustSwamp(c, "datastore", "sync")
	backup := filepath.Join(w.dir, "backup")
	if out := w.c.ok("backup", backup); !strings.Contains(out, "blobs.txt") {
		t.Fatalf("backup:\n%s", out)
	}
	for _, r := range []string{a, b, c} {
		w.mustSwamp(r, "model", "method", "run", "who", "execute")
	}
	w.mustSwamp(a, "datastore", "sync")
	for _, r := range []string{a, b, c} {
		w.sl(r, "sync") // every raw in the cache, to count the runs
	}
	runs := w.allRuns(a, b, c)
	if len(runs) != 5 {
		t.Fatalf("runs before the restore: %v, want 5", runs)
	}

	w.c.ok("restore", backup, "--replace")
	d := w.repo("host-d")
	w.mustSwamp(d, "model", "method", "run", "who", "execute") // version 3 again: a lost run's number
	out := w.mustSwamp(b, "model", "method", "run", "who", "execute")
	t.Logf("b's first run after the restore:\n%s", out)
	if !strings.Contains(out, "the ledger had lost commits this host applied") {
		t.Errorf("b's first command after the restore does not say it republished what the ledger lost:\n%s", out)
	}
	for _, r := range []string{a, c} {
		out := w.mustSwamp(r, "datastore", "sync")
		t.Logf("%s's sync after the restore:\n%s", filepath.Base(r), out)
	}
	w.synced(a, b, c, d)
	all := w.allRuns(a, b, c, d)
	for _, run := range runs {
		if !slices.Contains(all, run) {
			t.Errorf("run %q, made before the restore, is lost", run)
		}
	}
	if len(all) != len(runs)+2 {
		t.Errorf("runs after: %v; want the 5 before and the 2 after", all)
	}
	w.checkRuns(all, a, b, c, d)
}

// TestSwampRealHotCopy is issue 39's exact sequence through the real swamp
// CLI: a hot copy of the server's store taken (the log and the NATS object
// store of the blobs in it), runs after it, the copy put back (not through
// syncledger restore), and commits until the head is again the HWM of a host
// that pulled the lost runs. That host's swamp datastore status says FORKED,
// never "up to date"; no host deletes a run; all converge, every run held
// once.
func TestSwampRealHotCopy(t *testing.T) {
	w := newRealSwampWorld(t)
	w.model("who", whoRun)
	srv, _ := natsjstest.RunServer(t)
	w.srv = srv
	w.start(srv.ClientURL())
	w.c.ok("init", "--blobs", "nats://swampblobs") // inside the store: copied with it
	a, b, c := w.repo("host-a"), w.repo("host-b"), w.repo("host-c")
	w.mustSwamp(a, "model", "method", "run", "who", "execute")
	w.mustSwamp(b, "datastore", "sync")
	w.mustSwamp(c, "datastore", "sync")
	js := filepath.Join(srv.StoreDir(), "jetstream")
	copyDir := filepath.Join(w.dir, "hot-copy")
	if out, err := exec.Command("cp", "-a", js, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("hot copy: %v\n%s", err, out)
	}
	for range 2 {
		w.mustSwamp(a, "model", "method", "run", "who", "execute")
	}
	w.mustSwamp(b, "datastore", "sync") // b holds the lost runs; its HWM is the lost head
	w.sl(b, "sync")
	lost := w.status(b).HWM
	w.sl(a, "sync")
	runs := w.allRuns(a, b)

	srv.Kill()
	if err := os.RemoveAll(js); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", copyDir, js).CombinedOutput(); err != nil {
		t.Fatalf("put the copy back: %v\n%s", err, out)
	}
	srv.Restart()
	// c writes on the restored server until the head is b's HWM again.
	for i := 0; w.status(c).Head < lost; i++ {
		put(t, w.cache(c), "files/after-the-restore-"+string(rune('a'+i)), "c's")
		w.sl(c, "commit", "-m", "c, on the restored server")
	}
	if st := w.status(c); st.Head != lost {
		t.Fatalf("the head is %d, past b's HWM %d", st.Head, lost)
	}
	out, _ := w.run(b, "datastore", "status")
	if strings.Contains(out, "up to date") || !strings.Contains(out, "FORKED") {
		t.Fatalf("b's datastore status with head == its HWM on the restored server:\n%s", out)
	}
	out = w.mustSwamp(b, "datastore", "sync")
	t.Logf("b's sync:\n%s", out)
	w.mustSwamp(a, "model", "method", "run", "who", "execute")
	w.synced(a, b, c)
	all := w.allRuns(a, b, c)
	for _, run := range runs {
		if !slices.Contains(all, run) {
			t.Errorf("run %q, made after the copy, is lost", run)
		}
	}
	if len(all) != len(runs)+1 {
		t.Errorf("runs after: %v; want the %d before and a's new one", all, len(runs))
	}
	w.checkRuns(all, a, b, c)
}

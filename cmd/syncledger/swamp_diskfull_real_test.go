package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/smallfs"
)

// TestSwampRealServerDiskFull (SYNCLEDGER_TEST_SWAMP and
// SYNCLEDGER_TEST_DISKFULL, root) is issue 39's point 2 through the real swamp
// CLI: serve on a small tmpfs of its own, blobs in its NATS object store, a
// model whose runs write 1.5 MB each. A run the server has no room for fails
// within seconds (it hung 611 s, then "timeout waiting for ack"), saying
// "the server's disk is full" with serve's data directory and what to free,
// and that the run stays in the cache for the next command. Space is freed
// beside the store, serve is not restarted: the next swamp command publishes
// the run, and both hosts agree, every run in the shared history.
func TestSwampRealServerDiskFull(t *testing.T) {
	w := newRealSwampWorld(t)
	dir := smallfs.MountT(t, 64<<20)
	filler := filepath.Join(dir, "filler")
	if _, err := smallfs.Fill(filler, 28<<20); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	srv, url := serveOn(t, data, "--ledger", "swamp", "--blobs", "nats://swampfull")
	w.start(url)
	w.model("big", `head -c 1100000 /dev/urandom | base64 -w0`)
	a, b := w.repo("host-a"), w.repo("host-b")

	var (
		out   string
		code  int
		took  time.Duration
		runs  int // runs that exited 0
		tries int
	)
	for tries = 1; tries <= 30; tries++ {
		start := time.Now()
		out, code = w.run(a, "model", "method", "run", "big", "execute")
		took = time.Since(start)
		if code != 0 {
			break
		}
		runs++
	}
	if code == 0 {
		t.Fatalf("30 runs of 1.5 MB on a 28 MB disk: none refused")
	}
	t.Logf("after %d runs, run %d failed in %v:\n%s", runs, tries, took, syncledgerLines(out))
	for _, want := range []string{"the server's disk is full (" + data + " has", "on the disk of serve's data directory " + data + ", then run this again",
		"this command's changes were not published", "the next swamp command publishes them"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failed run's output does not say %q", want)
		}
	}
	matchesDocumented(t, out, "were not published", "they stay in this host's cache") // as docs/swamp.md shows it
	if !regexp.MustCompile(`free [0-9.]+ [KM]iB on the disk`).MatchString(out) {
		t.Errorf("the failed run's output does not say how much to free")
	}
	if took > time.Minute {
		t.Errorf("the failed run took %v: want seconds, not minutes", took)
	}

	// The other host: its run cannot take its lock (a write), and says why
	// as fast; nothing of it runs.
	start := time.Now()
	out, code = w.run(b, "model", "method", "run", "big", "execute")
	t.Logf("b's run on a full server: exit %d after %v:\n%s", code, time.Since(start), syncledgerLines(out))
	if code == 0 || !strings.Contains(out, "the server's disk is full (") || time.Since(start) > time.Minute {
		t.Errorf("b's run on a full server: exit %d after %v", code, time.Since(start))
	}

	// Space freed beside the store; serve is not restarted.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // serve reads the free space 4 times a second
	out = w.mustSwamp(a, "datastore", "sync")
	t.Logf("a's sync after space was freed:\n%s", syncledgerLines(out))
	w.mustSwamp(b, "datastore", "sync")
	select {
	case <-srv.done:
		t.Fatalf("serve exited: %v", srv.err)
	default:
	}
	w.synced(a, b)
	for _, r := range []string{a, b} {
		v := w.dataVersions(r, "big")
		// Every run that exited 0, and a's that failed to publish (its next
		// command did).
		if v["result"] != runs+1 {
			t.Errorf("%s: big's result at version %d, want %d (%d runs, and a's unpublished one)", filepath.Base(r), v["result"], runs+1, runs)
		}
	}
}

// syncledgerLines is swamp's output without what the runs print: the lines of
// the datastore extension and of swamp's own log.
func syncledgerLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "syncledger") || strings.Contains(l, "datastore") || strings.Contains(l, "Completed") || strings.Contains(l, "Sync complete") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

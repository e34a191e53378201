//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSwampRealLockLost (issue 39 point 3): a laptop suspended in the middle
// of a method. Host a runs a model and is stopped as a whole (swamp, its
// agent and the method: SIGSTOP to its process group) once it holds the
// model's lock; past the lock's TTL (3 s) host b takes the lock, runs the
// same model and publishes. a resumes (SIGCONT) and finishes its run: it
// must publish nothing while b's run is the lock's, exit non-zero saying the
// lock was lost, to whom, and what happens next, and keep its run in its
// cache. Its next command publishes the run after b's; both hosts end with
// both runs.
//
// On the code before fences (main at 480bfbd, or aa2f60c) a's commit met b's
// on the model's partition, was renumbered past it (version 2 → 3) and
// published: exit 0, no word of the lost lock — the test fails at a's exit.
func TestSwampRealLockLost(t *testing.T) {
	w := newRealSwamp(t)
	marks := filepath.Join(w.dir, "marks")
	if err := os.MkdirAll(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	// who touches a file named after its host once it runs (swamp pulled,
	// under the model's lock), waits, and prints the host.
	w.model("who", `touch `+marks+`/$(basename $PWD); sleep 3; echo "run on $(basename $PWD)"`)
	a, b := w.repo("host-a"), w.repo("host-b") // lock TTL 3 s, renewed every 1 s
	w.mustSwamp(a, "model", "method", "run", "who", "execute")
	w.mustSwamp(b, "datastore", "sync")
	mark := filepath.Join(marks, "host-a")
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	key := "data/command/shell/" + modelID(t, w.template, "who") + "/.lock"
	locks := w.locks()

	run := w.cmd(a, "model", "method", "run", "who", "execute")
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // swamp, its agent and the method
	var outA strings.Builder
	run.Stdout, run.Stderr = &outA, &outA
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's run never started:\n%s", outA.String())
		}
	}
	held, err := locks.Inspect(t.Context(), key)
	if err != nil || held == nil {
		t.Fatalf("a runs who without holding its lock: %+v, %v", held, err)
	}
	// The laptop is suspended in the middle of the method.
	if err := syscall.Kill(-run.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(-run.Process.Pid, syscall.SIGCONT)
		}
	}
	defer resume()

	// b runs the same model: it waits out a's TTL, takes the lock, runs and
	// publishes its run (who's version 2).
	outB := w.mustSwamp(b, "model", "method", "run", "who", "execute")
	t.Logf("b ran who %v after a was suspended:\n%s", time.Since(stopped).Round(time.Millisecond), outB)
	head := w.status(b).Head
	if runs := w.dataRuns(b, "who", "result"); !maps.Equal(runs, map[int]string{1: "run on host-a", 2: "run on host-b"}) {
		t.Fatalf("b's run is not the ledger's version 2: %v", runs)
	}

	// a resumes, finishes its method and pushes: refused.
	resume()
	err = run.Wait()
	t.Logf("a, resumed %v after it was suspended (%v):\n%s", time.Since(stopped).Round(time.Millisecond), err, outA.String())
	if err == nil {
		t.Fatal("a's run exited 0 although its lock was lost and taken by b")
	}
	for _, want := range []string{"lock " + key + " was lost", "on host host-b", "lock lost", "not published",
		"they stay in this host's cache", "publishes this one after it"} {
		if !strings.Contains(outA.String(), want) {
			t.Errorf("a's output does not say %q", want)
		}
	}
	// Since b's run the ledger holds no event: only the fence record of the
	// global lock a took for its push.
	since := strings.TrimSpace(w.sl(b, "log", "--from", fmt.Sprint(head+1), "--json"))
	t.Logf("the ledger after b's run:\n%s", since)
	for _, line := range strings.Split(since, "\n") {
		var rec map[string]json.RawMessage
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log --json: %v: %s", err, line)
		}
		if _, ok := rec["event"]; ok {
			t.Fatalf("a published under the lost lock: %s", line)
		}
	}
	st := w.status(a)
	if len(st.Dirty) == 0 {
		t.Fatal("a's run is not kept in its cache (nothing uncommitted)")
	}
	t.Logf("a's run kept, uncommitted: %q", st.Dirty)
	if runs := w.dataRuns(b, "who", "result"); !maps.Equal(runs, map[int]string{1: "run on host-a", 2: "run on host-b"}) {
		t.Fatalf("the ledger after a's refused push: %v", runs)
	}

	// a's next command (another model) pulls b's run and publishes a's after
	// it, as version 3; both hosts then hold both runs.
	out := w.mustSwamp(a, "model", "method", "run", "other", "execute")
	t.Logf("a's next command:\n%s", out)
	if !strings.Contains(out, "version 2 is now 3") {
		t.Errorf("a's next command does not say its run moved from version 2 to 3:\n%s", out)
	}
	if st := w.status(a); len(st.Dirty) != 0 || st.HWM != st.Head {
		t.Fatalf("a after its next command: hwm %d, head %d, dirty %q", st.HWM, st.Head, st.Dirty)
	}
	w.mustSwamp(b, "datastore", "sync")
	want := map[int]string{1: "run on host-a", 2: "run on host-b", 3: "run on host-a"}
	for _, r := range []string{a, b} {
		if got := w.dataRuns(r, "who", "result"); !maps.Equal(got, want) {
			t.Errorf("%s: who's result versions %v, want %v", filepath.Base(r), got, want)
		}
	}
	w.synced(a, b)
}

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dataRuns returns, for each version of a model's data name, what swamp's
// `data versions` lists and `data get --version` shows of it (the content's
// stdout, for a command/shell result).
func (w *realSwamp) dataRuns(repo, model, name string) map[int]string {
	w.t.Helper()
	out := w.mustSwamp(repo, "data", "versions", model, name, "--json")
	var vs struct {
		Versions []struct {
			Version  int  `json:"version"`
			IsLatest bool `json:"isLatest"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &vs); err != nil {
		w.t.Fatalf("data versions --json: %v\n%s", err, out)
	}
	runs := map[int]string{}
	for _, v := range vs.Versions {
		out := w.mustSwamp(repo, "data", "get", model, name, "--version", fmt.Sprint(v.Version), "--json")
		var d struct {
			Version int `json:"version"`
			Content struct {
				Stdout string `json:"stdout"`
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &d); err != nil {
			w.t.Fatalf("data get --version %d --json: %v\n%s", v.Version, err, out)
		}
		if d.Version != v.Version {
			w.t.Fatalf("%s: data get --version %d shows version %d", repo, v.Version, d.Version)
		}
		runs[v.Version] = d.Content.Stdout
	}
	return runs
}

// TestSwampRealServerKilled (issue 25 point 1): the NATS server dies while
// host a runs a model (after swamp's pull, before its push). a's command says
// that its data was not published and what happens next, and exits non-zero.
// The server comes back; host b runs the same model and writes the data
// version a wrote. a's next command (another model) succeeds with no resolve:
// a's run is moved to the next free version, and both hosts' swamp list both
// runs.
func TestSwampRealServerKilled(t *testing.T) {
	w := newRealSwamp(t)
	marks := filepath.Join(w.dir, "marks")
	if err := os.MkdirAll(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	// who touches a file named after its host when it starts (swamp has
	// pulled: the method runs under the lock, after the pull), waits, and
	// prints the host.
	w.model("who", `touch `+marks+`/$(basename $PWD); sleep 2; echo "run on $(basename $PWD)"`)
	a, b := w.repo("host-a"), w.repo("host-b")
	w.mustSwamp(a, "model", "method", "run", "who", "execute")
	w.mustSwamp(b, "datastore", "sync")
	mark := filepath.Join(marks, "host-a")
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}

	run := w.cmd(a, "model", "method", "run", "who", "execute")
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
	w.srv.Kill()
	err := run.Wait()
	t.Logf("a's run with the server killed (%v):\n%s", err, outA.String())
	if err == nil {
		t.Fatal("a's run exited 0 although its push could not reach the ledger")
	}
	if !strings.Contains(outA.String(), "not published") || !strings.Contains(outA.String(), "next swamp command") {
		t.Fatalf("a's failed push does not say its data was not published and what happens next:\n%s", outA.String())
	}
	if !strings.Contains(outA.String(), "cannot reach NATS") {
		t.Fatalf("a's failed push does not say the server could not be reached (ledger.ErrUnreachable):\n%s", outA.String())
	}
	// Word for word as docs/swamp.md shows it (issue 39).
	matchesDocumented(t, outA.String(), "were not published", "they stay in this host's cache")
	w.srv.Restart()

	w.mustSwamp(b, "model", "method", "run", "who", "execute")
	// a's next command runs another model: its pull publishes a's run.
	out := w.mustSwamp(a, "model", "method", "run", "other", "execute")
	t.Logf("a's next command:\n%s", out)
	if !strings.Contains(out, "published after another host's run of the same version") || !strings.Contains(out, "version 2 is now 3") {
		t.Errorf("a's next command does not say its run moved from version 2 to 3:\n%s", out)
	}
	if st := w.status(a); len(st.Dirty) != 0 || st.HWM != st.Head {
		t.Fatalf("a after its next command: hwm %d, head %d, dirty %q", st.HWM, st.Head, st.Dirty)
	}
	want := map[int]string{1: "run on host-a", 2: "run on host-b", 3: "run on host-a"}
	w.mustSwamp(b, "datastore", "sync")
	for _, r := range []string{a, b} {
		if got := w.dataRuns(r, "who", "result"); !maps.Equal(got, want) {
			t.Errorf("%s: who's result versions %v, want %v (both runs in the shared history)", filepath.Base(r), got, want)
		}
		if v := w.dataVersions(r, "who"); v["result"] != 3 || v["log"] != 3 {
			t.Errorf("%s: who's latest versions %v, want result and log at 3", filepath.Base(r), v)
		}
	}
	for _, r := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(w.cache(r), ".syncledger", "conflicts")); err == nil {
			t.Errorf("%s: files were set aside as conflicts", filepath.Base(r))
		}
	}
	w.synced(a, b)
}

// TestSwampRealWorkflowFinal (issue 25 point 3): swamp writes a workflow run's
// final state and reports after its last push; all of it reaches the ledger
// before `swamp workflow run` exits, so the other host's next sync shows the
// run finished.
func TestSwampRealWorkflowFinal(t *testing.T) {
	w := newRealSwamp(t)
	w.mustSwamp(w.template, "workflow", "create", "wf")
	p := filepath.Join(w.template, "workflows", "workflow-wf.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(strings.Replace(string(b), "modelIdOrName: example-model", "modelIdOrName: vpc", 1), "methodName: run", "methodName: execute", 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	a, c := w.repo("host-a"), w.repo("host-c")
	w.mustSwamp(a, "workflow", "run", "wf")
	if st := w.status(a); len(st.Dirty) != 0 || st.HWM != st.Head {
		t.Fatalf("a after its workflow run exited: hwm %d, head %d, not published: %q", st.HWM, st.Head, st.Dirty)
	}
	w.mustSwamp(c, "datastore", "sync")
	out := w.mustSwamp(c, "workflow", "history", "wf", "--json")
	var run struct {
		Status string `json:"status"`
		Jobs   []struct {
			Status string `json:"status"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &run); err != nil {
		t.Fatalf("workflow history --json: %v\n%s", err, out)
	}
	if run.Status != "succeeded" || len(run.Jobs) != 1 || run.Jobs[0].Status != "succeeded" {
		t.Fatalf("c sees a's workflow run as %+v, want it succeeded:\n%s", run, out)
	}
	w.synced(a, c)
}

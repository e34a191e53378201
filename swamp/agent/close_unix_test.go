//go:build unix

package agent

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestAgentClose: what swamp writes after its last push (marked dirty) is
// published by the close request the extension sends at swamp's exit over
// the close pipes, as it does (write in, read out); nothing written since the
// last push publishes nothing.
func TestAgentClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cache := t.TempDir()
	c := startAgent(t, e, cache, nil)
	r := c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol})
	if r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	dir, _ := r.Result.(map[string]any)["close"].(string)
	if dir == "" {
		t.Fatalf("hello names no close pipes: %+v", r.Result)
	}
	in, err := os.OpenFile(filepath.Join(dir, "in"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Open(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	answers := bufio.NewScanner(out)
	closeReq := func(req CloseRequest) Response {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"op": "close", "hints": req.Hints, "publish": req.Publish})
		if _, err := in.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		if !answers.Scan() {
			t.Fatalf("no answer to close: %v", answers.Err())
		}
		var resp Response
		if err := json.Unmarshal(answers.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// Pushed, then the final state written after the push.
	write(t, cache, "workflow-runs/wf/workflow-run-1.yaml", "status: running\n")
	c.notify(map[string]any{"op": "hint", "hints": []string{"workflow-runs/wf/workflow-run-1.yaml"}})
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil {
		t.Fatalf("push: %+v", r.Error)
	}
	head, _ := e.log.LastSeq(t.Context())
	write(t, cache, "workflow-runs/wf/workflow-run-1.yaml", "status: succeeded\n")
	c.notify(map[string]any{"op": "hint", "hints": []string{"workflow-runs/wf/workflow-run-1.yaml"}})
	// The close carries the paths marked dirty since the last push, as the
	// extension sends it: the hint above goes over stdin, the close over its
	// pipe, and nothing orders the two (the close may be read first).
	r = closeReq(CloseRequest{Hints: []string{"workflow-runs/wf/workflow-run-1.yaml"}, Publish: true})
	if r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 {
		t.Fatalf("close: %+v", r)
	}
	if h, _ := e.log.LastSeq(t.Context()); h <= head {
		t.Fatalf("close published nothing: head %d", h)
	}
	// Nothing written since: nothing published.
	head, _ = e.log.LastSeq(t.Context())
	if r := closeReq(CloseRequest{Publish: true}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 0 {
		t.Fatalf("a second close: %+v", r)
	}
	if h, _ := e.log.LastSeq(t.Context()); h != head {
		t.Fatalf("a close with nothing written published: head %d → %d", head, h)
	}
}

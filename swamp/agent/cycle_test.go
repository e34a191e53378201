package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

// cycleAgent is an agent on a fresh cache of e, and the cache Host it opened.
type cycleAgent struct {
	t     *testing.T
	c     *agentClient
	cache string
	h     atomic.Pointer[host.Host]
}

func startCycleAgent(t *testing.T, e *env) *cycleAgent {
	t.Helper()
	ca := &cycleAgent{t: t, cache: t.TempDir()}
	ca.c = serveAgent(t, Config{Ports: ports{e: e, cache: ca.cache, opened: func(h *host.Host) { ca.h.Store(h) }}})
	if r := ca.c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	return ca
}

func (ca *cycleAgent) write(rel, content string) {
	ca.t.Helper()
	p := filepath.Join(ca.cache, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		ca.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		ca.t.Fatal(err)
	}
}

// ok sends req and fails the test unless it is answered without an error.
func (ca *cycleAgent) ok(req map[string]any) map[string]any {
	ca.t.Helper()
	r := ca.c.call(req)
	if r.Error != nil {
		ca.t.Fatalf("%v: %+v", req["op"], r.Error)
	}
	res, _ := r.Result.(map[string]any)
	return res
}

// hashed is how many times the agent's cache Host read a file to hash it.
func (ca *cycleAgent) hashed() int64 {
	h := ca.h.Load()
	if h == nil {
		ca.t.Fatal("the agent opened no cache")
	}
	return h.Hashed()
}

// TestPushCycleHashesOnce: one swamp push cycle — the pull (and the scan of
// the cache the agent runs after it), swamp's writes each after its
// markDirty hint, then preparePush and commitPush (or one pushChanged) —
// reads each changed file once to hash it: what the scan after the pull, a
// hint's work and the prepare hashed is handed to the push, not done again.
// Each kind of changed file is in it: one changed before the pull (the scan
// after the pull finds it), files written after a hint (the next hint's
// work), the last hinted one (the prepare's), one written after the pull
// with no hint (found by the agent's dirty set, or the whole scan).
func TestPushCycleHashesOnce(t *testing.T) {
	t.Parallel()
	for _, twoPhase := range []bool{true, false} {
		t.Run(fmt.Sprintf("twoPhase=%v", twoPhase), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ca := startCycleAgent(t, e)
			for round := range 2 {
				start := int64(0)
				if round > 0 {
					start = ca.hashed()
				}
				ca.write("data/t/before/latest", fmt.Sprint("before ", round)) // changed before the pull
				ca.ok(map[string]any{"op": "pull"})
				var hints []string
				for _, name := range []string{"result", "log", "summary"} {
					dir := fmt.Sprintf("data/t/m/%s", name)
					hints = append(hints, dir)
					ca.c.notify(map[string]any{"op": "hint", "hints": []string{dir}})
					ca.write(fmt.Sprintf("%s/%d/raw", dir, round+1), fmt.Sprint(name, " ", round))
				}
				ca.write("data/t/other/latest", fmt.Sprint("other ", round)) // no hint
				const changed = 5
				var files float64
				if twoPhase {
					if res := ca.ok(map[string]any{"op": "prepare", "hints": hints}); res["files"].(float64) != changed {
						t.Fatalf("round %d: prepare: %+v, want the %d changed files", round, res, changed)
					}
					files = ca.ok(map[string]any{"op": "commit", "hints": hints})["files"].(float64)
				} else {
					files = ca.ok(map[string]any{"op": "push", "hints": hints})["files"].(float64)
				}
				if files != changed {
					t.Fatalf("round %d: the push published %v files, want %d", round, files, changed)
				}
				if n := ca.hashed() - start; n != changed {
					t.Errorf("round %d: the push cycle read a file to hash it %d times, want %d (each changed file once)", round, n, changed)
				}
			}
			if head, err := e.log.LastSeq(t.Context()); err != nil || head == 0 {
				t.Fatalf("head %d, %v", head, err)
			}
		})
	}
}

var _ = context.Background
var _ = ledger.DigestOf

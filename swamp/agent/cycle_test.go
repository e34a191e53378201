package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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
				// swamp writes once the scan after the pull is done: a file
				// written while it is read is read again (its digest is not
				// the file's then), as it must be.
				ca.c.agent.scanned()
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

// TestPushAfterPrepareReadsChangedFiles: a file changed after the prepare
// read it — written again at once (within its file system's timestamp
// granularity), written with its old mtime set back (rsync -t, cp -p), or
// replaced by another file of that size and mtime — is read again by the
// commit: what it publishes is the content on disk at the commit, never the
// prepare's.
func TestPushAfterPrepareReadsChangedFiles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(t *testing.T, p string, mtime time.Time)
	}{
		{"written again", func(t *testing.T, p string, _ time.Time) {
			if err := os.WriteFile(p, []byte("version 2"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"mtime set back", func(t *testing.T, p string, mtime time.Time) {
			if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
				t.Skip("the change time (ctime) is read on Linux and macOS only")
			}
			if err := os.WriteFile(p, []byte("version 2"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", func(t *testing.T, p string, mtime time.Time) {
			tmp := p + ".new"
			if err := os.WriteFile(tmp, []byte("version 2"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(tmp, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ca := startCycleAgent(t, e)
			ca.ok(map[string]any{"op": "pull"})
			ca.c.agent.scanned()
			const rel = "data/t/m/result/1/raw"
			hints := []string{"data/t/m/result"}
			ca.c.notify(map[string]any{"op": "hint", "hints": hints})
			ca.write(rel, "version 1") // the same size as version 2
			p := filepath.Join(ca.cache, filepath.FromSlash(rel))
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if res := ca.ok(map[string]any{"op": "prepare", "hints": hints}); res["files"].(float64) != 1 {
				t.Fatalf("prepare: %+v", res)
			}
			read := ca.hashed()
			tc.change(t, p, fi.ModTime())
			if res := ca.ok(map[string]any{"op": "commit", "hints": hints}); res["files"].(float64) != 1 {
				t.Fatalf("commit: %+v", res)
			}
			if n := ca.hashed() - read; n != 1 {
				t.Errorf("the commit read the changed file %d times, want 1", n)
			}
			// Another host gets the content on disk at the commit.
			other := t.TempDir()
			oh, err := host.Open(host.Config{Cache: other, Host: "other", Log: e.log, Blobs: e.blobs})
			if err != nil {
				t.Fatal(err)
			}
			defer oh.Close()
			if _, err := oh.Sync(testCtx(t), host.SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(other, filepath.FromSlash(rel)))
			if err != nil || string(got) != "version 2" {
				t.Fatalf("the other host has %q (%v), want the file as it was at the commit, %q", got, err, "version 2")
			}
		})
	}
}

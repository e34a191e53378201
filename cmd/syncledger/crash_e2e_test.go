//go:build failpoints

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/projector/host"
)

// crashEnv is a ledger with some history, written by host "writer".
func crashEnv(t *testing.T) (*shell, *natsjs.Log, string) {
	t.Helper()
	srv, nc := natsjstest.RunServer(t)
	c := &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+srv.ClientURL(), "SYNCLEDGER_LEDGER=crash", "SYNCLEDGER_LOG_LEVEL=error")}
	c.ok("init", "--blobs", "file://"+t.TempDir())
	lg, err := natsjs.OpenLog(context.Background(), nc, "crash")
	if err != nil {
		t.Fatal(err)
	}
	writer := t.TempDir()
	for i := range 4 {
		for m := range 3 {
			put(t, writer, fmt.Sprintf("data/t/m%d/d/%d/raw", m, i), fmt.Sprintf("v%d-%d", m, i))
		}
		put(t, writer, "audit/log", strings.Repeat("line\n", i+1))
		c.ok("--cache", writer, "--host", "writer", "commit", "-m", fmt.Sprint("round ", i))
	}
	return c, lg, writer
}

// commitsBy counts the commits in the log that touch path, by commit id.
func commitsBy(t *testing.T, lg *natsjs.Log, path string) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := lg.Read(context.Background(), 1, 0, func(r ledger.Record) error {
		for _, e := range r.Event.Entries {
			if e.Path == path {
				out[r.Event.Commit]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCrashAtFailpoints kills `syncledger sync` and `syncledger commit` with SIGKILL
// at every named failpoint; after a restart and a sync, the cache, the marks and
// the HWM equal those of a host that ran uninterrupted, and no commit is lost or
// doubled.
func TestCrashAtFailpoints(t *testing.T) {
	for _, fp := range host.Failpoints {
		t.Run(fp, func(t *testing.T) {
			c, lg, writer := crashEnv(t)
			victim, ref := t.TempDir(), t.TempDir()
			hv := []string{"--cache", victim, "--host", "victim"}
			isCommit := strings.HasPrefix(fp, "commit-")
			if isCommit {
				c.ok(append(hv, "sync")...)
				put(t, victim, "data/t/victim/d/1/raw", "victim's change")
				put(t, victim, "audit/victim", "v")
			}
			args := append(hv, "sync")
			if isCommit {
				args = append(hv, "commit", "-m", "victim")
			}
			r := c.runEnv([]string{FailpointEnv + "=" + fp}, args...)
			if r.code != -1 {
				t.Fatalf("%s with failpoint %s: exit %d, want killed\nstderr: %s", args[len(hv)], fp, r.code, r.stderr)
			}
			// Restart: the interrupted command again, then a sync.
			if isCommit {
				c.ok(append(hv, "commit", "-m", "victim")...)
			}
			c.ok(append(hv, "sync")...)
			c.ok("--cache", ref, "--host", "ref", "sync")
			c.ok("--cache", writer, "--host", "writer", "sync")

			if diff := cmp.Diff(tree(t, ref), tree(t, victim)); diff != "" {
				t.Fatalf("cache after crash and restart differs from an uninterrupted host (-ref +victim):\n%s", diff)
			}
			sv, sr := c.status(victim), c.status(ref)
			if sv.HWM != sv.Head || sv.HWM != sr.HWM {
				t.Fatalf("hwm victim %d ref %d head %d", sv.HWM, sr.HWM, sv.Head)
			}
			if diff := cmp.Diff(sr.Partitions, sv.Partitions); diff != "" {
				t.Fatalf("marks differ (-ref +victim):\n%s", diff)
			}
			if len(sv.Dirty) != 0 {
				t.Fatalf("victim still dirty: %v", sv.Dirty)
			}
			if isCommit {
				if n := commitsBy(t, lg, "data/t/victim/d/1/raw"); len(n) != 1 {
					t.Fatalf("victim's change is in %d commits, want exactly 1: %v", len(n), n)
				}
				if tree(t, writer)["data/t/victim/d/1/raw"] != "victim's change" {
					t.Fatal("victim's commit did not reach the writer")
				}
			}
		})
	}
}

// TestCrashBetweenSplitCommitsCLI kills a commit of 1,100 partitions (two
// commits: 1,000 and 100 partitions) with SIGKILL after its first commit is
// recorded, and after it is appended but not recorded: the first commit stays
// in the log, the other 100 partitions' files stay uncommitted, and the next
// commit publishes exactly those; every file is in exactly one commit, and
// every host converges.
func TestCrashBetweenSplitCommitsCLI(t *testing.T) {
	const parts = 1_100
	for _, fp := range []string{"commit-after-persist", "commit-after-append"} {
		t.Run(fp, func(t *testing.T) {
			c, lg, writer := crashEnv(t)
			victim := t.TempDir()
			hv := []string{"--cache", victim, "--host", "victim"}
			c.ok(append(hv, "sync")...)
			head := c.status(victim).Head
			putWide(t, victim, parts, "victim")
			if r := c.runEnv([]string{FailpointEnv + "=" + fp}, append(hv, "commit", "-m", "wide")...); r.code != -1 {
				t.Fatalf("commit with failpoint %s: exit %d, want killed\nstderr: %s", fp, r.code, r.stderr)
			}
			st := c.status(victim)
			if st.Head != head+ledger.MaxBatch {
				t.Fatalf("after the kill the head is %d, want the first commit's %d events after %d", st.Head, ledger.MaxBatch, head)
			}
			dirty := len(st.Dirty)
			if fp == "commit-after-persist" && dirty != parts-ledger.MaxBatch {
				t.Fatalf("after the kill %d files are uncommitted, want the second commit's %d", dirty, parts-ledger.MaxBatch)
			}
			r := c.run(append(hv, "commit", "-m", "rest")...)
			if r.code != 0 || strings.Contains(r.stderr, "published as") {
				t.Fatalf("commit after the kill: exit %d, want one commit\nstdout: %s\nstderr: %s", r.code, tail(r.stdout), r.stderr)
			}
			c.ok(append(hv, "sync")...)
			c.ok("--cache", writer, "--host", "writer", "sync")
			sv, sw := c.status(victim), c.status(writer)
			if sv.HWM != sv.Head || sw.HWM != sv.Head || len(sv.Dirty) != 0 || sv.Head != head+parts {
				t.Fatalf("victim hwm %d, writer hwm %d, head %d (want %d), victim dirty %d", sv.HWM, sw.HWM, sv.Head, head+parts, len(sv.Dirty))
			}
			if diff := cmp.Diff(tree(t, writer), tree(t, victim)); diff != "" {
				t.Fatalf("caches differ (-writer +victim):\n%s", diff)
			}
			in := map[string]map[string]bool{} // path → the commits touching it
			err := lg.Read(context.Background(), 1, 0, func(r ledger.Record) error {
				for _, e := range r.Event.Entries {
					if in[e.Path] == nil {
						in[e.Path] = map[string]bool{}
					}
					in[e.Path][r.Event.Commit] = true
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for m := range parts {
				if n := len(in[wideRaw(m)]); n != 1 {
					t.Fatalf("%s is in %d commits, want exactly 1", wideRaw(m), n)
				}
			}
		})
	}
}

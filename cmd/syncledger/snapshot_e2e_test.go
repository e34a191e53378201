package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSnapshotRebuildReplayGCCLI runs the snapshot commands end to end through
// the binary: snapshot, retention, a stale host's sync falling back to a rebuild,
// rebuild, replay and gc.
func TestSnapshotRebuildReplayGCCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "snap")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	w, stale := t.TempDir(), t.TempDir()
	hw := []string{"--cache", w, "--host", "writer"}
	hs := []string{"--cache", stale, "--host", "stale"}

	put(t, w, "audit/a.jsonl", "a1")
	put(t, w, "data/t/m/one/f/raw", "one")
	c.ok(append(hw, "commit", "-m", "1")...)
	c.ok(append(hs, "sync")...) // stale from here on
	for i, content := range []string{"a2", "a3", "a4"} {
		put(t, w, "audit/a.jsonl", content)
		put(t, w, "data/t/m/two/f/file", content)
		if i == 1 {
			put(t, w, "files/x", "x")
		}
		c.ok(append(hw, "commit", "-m", content)...)
	}
	var snap struct {
		Snapshot struct {
			Seq uint64 `json:"seq"`
		} `json:"snapshot"`
		Retain *struct {
			Before  uint64 `json:"before"`
			Dropped uint64 `json:"dropped"`
		} `json:"retain"`
	}
	out := c.ok("snapshot", "--json")
	if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.Snapshot.Seq == 0 {
		t.Fatalf("snapshot --json: %v\n%s", err, out)
	}
	atSnap, firstSnap := tree(t, w), snap.Snapshot.Seq
	put(t, w, "audit/a.jsonl", "a5")
	c.ok(append(hw, "commit", "-m", "a5")...)
	out = c.ok("snapshot", "--retain-margin", "0", "--json")
	if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.Retain == nil || snap.Retain.Dropped == 0 {
		t.Fatalf("snapshot --retain-margin 0: %v\n%s", err, out)
	}
	if out := c.ok("snapshot", "--list"); !strings.Contains(out, "complete from seq") || strings.Count(out, ".snap.zst") != 2 {
		t.Fatalf("snapshot --list:\n%s", out)
	}

	var st struct {
		Head, First, Snapshot, HWM uint64
	}
	if err := json.Unmarshal([]byte(c.ok(append(hw, "status", "--json")...)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Snapshot != st.Head || st.First <= 1 {
		t.Fatalf("status: %+v; want the newest snapshot at the head and a first seq above 1", st)
	}

	// The stale host's HWM is below what the stream holds: sync rebuilds.
	r := c.run(append(hs, "sync")...)
	if r.code != 0 || !strings.Contains(r.stderr, "rebuilding") {
		t.Fatalf("stale sync: %+v", r)
	}
	if diff := cmp.Diff(tree(t, w), tree(t, stale)); diff != "" {
		t.Fatalf("stale host after sync (-writer +stale):\n%s", diff)
	}

	// Time travel to the first snapshot's seq (the events after it are gone, the snapshot is not).
	into := filepath.Join(t.TempDir(), "tree")
	c.ok("replay", "--to", jsonNum(firstSnap), "--into", into, "--quiet")
	if diff := cmp.Diff(atSnap, tree(t, into)); diff != "" {
		t.Fatalf("replay --to %d (-live then +replay):\n%s", firstSnap, diff)
	}
	// gc keeps what a rebuild needs; then a new host rebuilds and verifies.
	if out := c.ok("gc", "--dry-run", "--grace", "0s"); !strings.Contains(out, "would delete") {
		t.Fatalf("gc --dry-run:\n%s", out)
	}
	if r := c.run("gc", "--grace", "0s"); r.code != 2 || !strings.Contains(r.stderr, "--allow-short-grace") {
		t.Fatalf("gc --grace 0s without --allow-short-grace: want a usage error naming the flag: %+v", r)
	}
	if out := c.ok("gc", "--grace", "0s", "--allow-short-grace"); !strings.Contains(out, "deleted") {
		t.Fatalf("gc:\n%s", out)
	}
	fresh := t.TempDir()
	if out := c.ok("--cache", fresh, "--host", "fresh", "rebuild", "--quiet"); !strings.Contains(out, "rebuilt from snapshot") {
		t.Fatalf("rebuild:\n%s", out)
	}
	c.ok("--cache", fresh, "--host", "fresh", "verify")
	if diff := cmp.Diff(tree(t, w), tree(t, fresh)); diff != "" {
		t.Fatalf("rebuilt host (-writer +fresh):\n%s", diff)
	}

	if out := c.ok("snapshot", "--list"); strings.Count(out, ".snap.zst") != 1 {
		t.Fatalf("gc must delete the snapshot no rebuild can use:\n%s", out)
	}
	if r := c.run("replay", "--to", "1", "--into", filepath.Join(t.TempDir(), "x"), "--quiet"); r.code != exitRebuild {
		t.Fatalf("replay to a dropped seq: %+v; want exit %d", r, exitRebuild)
	}
	if r := c.run("replay", "--into", into); r.code != exitUsage {
		t.Fatalf("replay without --to: %+v", r)
	}
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

//go:build failpoints

package main

import (
	"testing"
)

// TestCrashAfterAppendCLI is #14 point 3 through the binary: host v is killed
// after its commit (shared=v1) is in the log but before v recorded it; w
// syncs it and commits w2 to the same file. v's file holds exactly what the
// log has at v's seq, so it is no local change: v's next sync, or its next
// commit, takes w2, and every host converges.
func TestCrashAfterAppendCLI(t *testing.T) {
	for _, next := range []string{"sync", "commit"} {
		t.Run(next, func(t *testing.T) {
			c := newCLI(t, "crash")
			c.ok("init", "--blobs", "file://"+t.TempDir())
			v, w := t.TempDir(), t.TempDir()
			hv := []string{"--cache", v, "--host", "v"}
			hw := []string{"--cache", w, "--host", "w"}
			put(t, v, "p/shared", "v0")
			c.ok(append(hv, "commit")...)
			c.ok(append(hw, "sync")...)

			put(t, v, "p/shared", "v1")
			if r := c.runEnv([]string{FailpointEnv + "=commit-after-append"}, append(hv, "commit")...); r.code != -1 {
				t.Fatalf("commit with failpoint commit-after-append: exit %d, want killed\n%s", r.code, r.stderr)
			}
			c.ok(append(hw, "sync")...)
			if got := tree(t, w)["p/shared"]; got != "v1" {
				t.Fatalf("w holds %q, want v's stored v1", got)
			}
			put(t, w, "p/shared", "w2")
			c.ok(append(hw, "commit")...)

			c.ok(append(hv, next)...)
			got := converge(t, c, []string{v, w}, map[string]string{"p/shared": "w2"})
			if got["p/shared"] != "w2" {
				t.Fatalf("converged on %q, want w2", got["p/shared"])
			}
		})
	}
}

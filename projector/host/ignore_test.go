package host

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIgnoredNeverCommitted: editor and temp files, swamp's local-only files
// and a nested cache's state are neither committed nor reported dirty; status
// lists them as ignored.
func TestIgnoredNeverCommitted(t *testing.T) {
	e := newEnv(t)
	a := e.host("a")
	writeFile(t, a, vpcRaw, "vpc")
	for _, p := range []string{
		"data/command/shell/vpc/result/1/.raw.swp",
		"data/command/shell/vpc/result/1/raw.tmp-123",
		"data/command/shell/vpc/result/1/raw~",
		"_extension_catalog.db",
		"run_tracker.db-wal",
		"secrets/vault/key",
		"datastore-bundles/h/x.js",
		"data/command/.syncledger/state.db",
	} {
		writeFile(t, a, p, "local only")
	}
	res := mustCommit(t, a, "")
	if !cmp.Equal(res.Paths, []string{vpcRaw}) {
		t.Fatalf("committed %v, want only %s", res.Paths, vpcRaw)
	}
	st := mustStatus(t, a)
	want := []string{
		"_extension_catalog.db",
		"data/command/.syncledger/",
		"data/command/shell/vpc/result/1/.raw.swp",
		"data/command/shell/vpc/result/1/raw.tmp-123",
		"data/command/shell/vpc/result/1/raw~",
		"datastore-bundles/",
		"run_tracker.db-wal",
		"secrets/",
	}
	slices.Sort(st.Ignored)
	if len(st.Dirty) != 0 || !cmp.Equal(st.Ignored, want) {
		t.Fatalf("status: dirty %v, ignored %v (want %v)", st.Dirty, st.Ignored, want)
	}
}

// TestIgnoredNeverOverwritten: a file committed before a host ignored it is not
// overwritten by that host's sync, nor deleted by its commit.
func TestIgnoredNeverOverwritten(t *testing.T) {
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "notes.log", "from a")
	writeFile(t, a, vpcRaw, "vpc")
	mustCommit(t, a, "")

	writeFile(t, b, ".syncledgerignore", "# b keeps its own log\nnotes.log\n")
	writeFile(t, b, "notes.log", "b's own")
	mustSync(t, b, SyncOptions{})
	if got, _ := readFile(t, b, "notes.log"); got != "b's own" {
		t.Fatalf("sync overwrote an ignored file: %q", got)
	}
	if got, _ := readFile(t, b, vpcRaw); got != "vpc" {
		t.Fatalf("sync did not write %s: %q", vpcRaw, got)
	}
	if st := mustStatus(t, b); !cmp.Equal(st.Dirty, []string{".syncledgerignore"}) {
		t.Fatalf("dirty %v, want only .syncledgerignore", st.Dirty)
	}
	if vr, err := b.Verify(context.Background()); err != nil || !vr.OK() {
		t.Fatalf("verify: %+v %v", vr, err)
	}
	res := mustCommit(t, b, "rules")
	if res.Deleted != 0 || !cmp.Equal(res.Paths, []string{".syncledgerignore"}) {
		t.Fatalf("commit: %+v", res)
	}

	// a takes the rule; removing its own notes.log is not a deletion either.
	mustSync(t, a, SyncOptions{})
	writeFile(t, a, "notes.log", "a changed it")
	if res := mustCommit(t, a, ""); !res.Nothing {
		t.Fatalf("commit of an ignored change: %+v", res)
	}
	if got, _ := readFile(t, b, "notes.log"); got != "b's own" {
		t.Fatalf("ignored file changed: %q", got)
	}
}

package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

// TestIgnoredNeverCommitted: editor and temp files, swamp's local-only files
// and a nested cache's state are neither committed nor reported dirty; status
// lists them as ignored.
func TestIgnoredNeverCommitted(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestForcedNeverWritten: a commit published before its paths were ignored (a
// nested cache's state, swamp's databases) is applied to the index only: a sync
// neither writes nor removes those files, and the other files of the commit
// arrive.
func TestForcedNeverWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b := e.host("b")
	writeFile(t, b, "run_tracker.db", "b's own database")
	var entries []ledger.Entry
	for _, p := range []string{"audit/x", "audit/.syncledger/state.db", "run_tracker.db", "secrets/k"} {
		content := []byte("from an old host: " + p)
		d := ledger.DigestOf(content)
		if err := e.blobs.Put(ctx, d, bytes.NewReader(content), int64(len(content))); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, ledger.Entry{Path: p, SHA256: d, Size: int64(len(content)), Mode: 0o644})
	}
	// One event per partition, as an older syncledger would have published.
	byPart := map[string][]ledger.Entry{}
	for _, en := range entries {
		byPart[ledger.PartitionKey(en.Path)] = append(byPart[ledger.PartitionKey(en.Path)], en)
	}
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var evs []ledger.Event
	for part, ens := range byPart {
		evs = append(evs, ledger.Event{V: ledger.FormatVersion, Ledger: e.uuid, Commit: id, Host: "old", At: time.Now(),
			Partition: part, ModelSeq: 1, Entries: ens})
	}
	for i := range evs {
		evs[i].Parts, evs[i].Part = len(evs), i+1
	}
	if _, err := e.log.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b, SyncOptions{})
	got := cacheFiles(t, b)
	want := map[string]string{"audit/x": "from an old host: audit/x", "run_tracker.db": "b's own database"}
	if !cmp.Equal(got, want) {
		t.Fatalf("cache after sync: %v, want %v", got, want)
	}
	if st := mustStatus(t, b); len(st.Dirty) != 0 {
		t.Fatalf("dirty after sync: %v", st.Dirty)
	}
	if vr, err := b.Verify(ctx); err != nil || !vr.OK() {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

//go:build failpoints

package host

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/maintain"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// crashAt returns a failpoint that panics at name, and a function that runs f
// and reports whether it stopped there.
type crashSignal struct{ name string }

func crashAt(name string) func(string) {
	return func(n string) {
		if n == name {
			panic(crashSignal{n})
		}
	}
}

func crashed(f func()) (stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crashSignal); !ok {
				panic(r)
			}
			stopped = true
		}
	}()
	f()
	return false
}

// TestRebuildKeepsFilesOfInterruptedApply is the projector simulator's finding
// (projector/sim_test.go, the journal of simHost) on the real shell: a sync
// that crashes after writing a new file and before persisting its index row
// leaves the file in the cache unclaimed. A normal sync would apply the event
// again and claim it; but if the log has meanwhile dropped that event
// (retention after a snapshot that no longer holds the file: it was deleted),
// the sync rebuilds from the snapshot, and the restore leaves the file alone
// as "a file the ledger does not know". It then looks like a new local file:
// status reports it dirty and the next commit publishes it again, bringing back
// a file another host deleted. The fix proposed: a journal of the paths a Ready
// (and an own commit between Append and RecordOwn) writes, persisted before
// the writes and cleared by the transaction that persists their rows; the
// restore removes journalled files that neither the index nor the snapshot
// holds.
func TestRebuildKeepsFilesOfInterruptedApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	writer := e.host("writer")
	writeFile(t, writer, "audit/keep", "k")
	mustCommit(t, writer, "keep")

	victimDir := t.TempDir()
	victim := e.hostAt("victim", victimDir)
	mustSync(t, victim, SyncOptions{})

	writeFile(t, writer, "audit/ghost", "boo")
	mustCommit(t, writer, "create ghost")
	victim.SetFailpoint(crashAt("sync-after-write"))
	if !crashed(func() { _, _ = victim.Sync(ctx, SyncOptions{}) }) {
		t.Fatal("the victim's sync did not reach sync-after-write")
	}
	victim.Close()
	if _, ok := readFile(t, victim, "audit/ghost"); !ok {
		t.Fatal("the crashed sync did not leave audit/ghost in the cache")
	}

	if err := os.Remove(writer.Dir().Root() + "/audit/ghost"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, writer, "delete ghost")
	writeFile(t, writer, "audit/keep", "k2")
	mustCommit(t, writer, "later")
	cfg := snapshot.Config{Log: e.log, Blobs: e.blobs, Objects: e.blobs}
	if _, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := maintain.Retain(ctx, cfg, 0); err != nil {
		t.Fatal(err)
	}

	victim = e.hostAt("victim", victimDir)
	res := mustSync(t, victim, SyncOptions{})
	if !res.Rebuilt {
		t.Fatalf("the victim's sync did not rebuild: %+v", res)
	}
	if diff := cmp.Diff(cacheFiles(t, writer), cacheFiles(t, victim)); diff != "" {
		t.Errorf("after the rebuild the victim's cache differs from the writer's (-writer +victim):\n%s", diff)
	}
	if st := mustStatus(t, victim); len(st.Dirty) > 0 {
		t.Errorf("after the rebuild the victim reports %q as local changes: its next commit publishes them", st.Dirty)
	}
}

// TestSyncAfterInterruptedApply: a sync interrupted after writing a Ready's
// files and before persisting it (a crash, or — far more often — one download
// of the Ready failing, which discards it) leaves files holding content the
// index does not claim. The package doc promises the next sync "finds the
// files already holding the new content"; but when the ledger has moved on for
// such a file meanwhile, the next Ready's New is newer still, the file matches
// neither Old nor New, and the sync stops with ErrLocalChanges — for good: the
// host changed nothing, and committing the "change" would publish stale
// content (a conflict). The journal proposed in
// TestRebuildKeepsFilesOfInterruptedApply fixes this too: a file holding what
// the journal says the shell wrote is not a local change.
func TestSyncAfterInterruptedApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	writer := e.host("writer")
	writeFile(t, writer, "audit/first", "1")
	mustCommit(t, writer, "first")
	victimDir := t.TempDir()
	victim := e.hostAt("victim", victimDir)
	mustSync(t, victim, SyncOptions{})
	writeFile(t, writer, "audit/x", "v1")
	mustCommit(t, writer, "v1")
	victim.SetFailpoint(crashAt("sync-after-write"))
	if !crashed(func() { _, _ = victim.Sync(ctx, SyncOptions{}) }) {
		t.Fatal("the victim's sync did not reach sync-after-write")
	}
	victim.Close()
	if got, _ := readFile(t, victim, "audit/x"); got != "v1" {
		t.Fatalf("the interrupted sync left audit/x = %q, want v1", got)
	}

	writeFile(t, writer, "audit/x", "v2")
	mustCommit(t, writer, "v2")
	victim = e.hostAt("victim", victimDir)
	if _, err := victim.Sync(ctx, SyncOptions{}); err != nil {
		t.Fatalf("sync after an interrupted apply, the ledger having moved on: %v", err)
	}
	if got, _ := readFile(t, victim, "audit/x"); got != "v2" {
		t.Fatalf("audit/x = %q, want v2", got)
	}
}

// TestSyncFinishesInterruptedRebuild: a rebuild's restore that stops after
// writing the snapshot's (older) files and before installing its state leaves
// the cache holding them under the old, newer state, which no sync would
// replace (its HWM is at the head already; the scan takes journalled files
// for the ledger's). Found by TestPowerLoss (cmd/syncledger): the host's cache
// stayed behind for good. The next sync finishes the rebuild first.
func TestSyncFinishesInterruptedRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	writer := e.host("writer")
	writeFile(t, writer, "audit/x", "v1")
	mustCommit(t, writer, "v1")
	cfg := snapshot.Config{Log: e.log, Blobs: e.blobs, Objects: e.blobs}
	if _, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, writer, "audit/x", "v2")
	mustCommit(t, writer, "v2")

	victimDir := t.TempDir()
	victim := e.hostAt("victim", victimDir)
	mustSync(t, victim, SyncOptions{})
	victim.SetFailpoint(crashAt("sync-after-write"))
	if !crashed(func() { _, _ = victim.Rebuild(ctx, RebuildOptions{}) }) {
		t.Fatal("the victim's rebuild did not reach sync-after-write")
	}
	victim.Close()
	if got, _ := readFile(t, victim, "audit/x"); got != "v1" {
		t.Fatalf("the interrupted restore left audit/x = %q, want the snapshot's v1", got)
	}

	victim = e.hostAt("victim", victimDir)
	res := mustSync(t, victim, SyncOptions{})
	if !res.Rebuilt {
		t.Errorf("the sync did not finish the rebuild: %+v", res)
	}
	if got, _ := readFile(t, victim, "audit/x"); got != "v2" {
		t.Fatalf("after the sync audit/x = %q, want v2", got)
	}
	if st := mustStatus(t, victim); len(st.Dirty) > 0 || st.HWM != st.Head {
		t.Errorf("after the sync: hwm %d head %d dirty %q", st.HWM, st.Head, st.Dirty)
	}
}

package swamp

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

const (
	rnModel = "data/command/shell/m1"
	rnData  = rnModel + "/result"
	rnDef   = "definitions-evaluated/command/shell/vpc.yaml"
)

// swampHost is a swamp host's cache on e's ledger.
type swampHost struct {
	t    *testing.T
	name string
	h    *host.Host
	root string
}

func newSwampHost(t *testing.T, e *env, name string) *swampHost {
	t.Helper()
	root := t.TempDir()
	h, err := host.Open(host.Config{Cache: root, Host: name, Log: e.log, Blobs: e.blobs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return &swampHost{t: t, name: name, h: h, root: root}
}

func (s *swampHost) write(rel, content string) {
	s.t.Helper()
	p := filepath.Join(s.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *swampHost) read(rel string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(rel)))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// run writes what a swamp run of the model writes as version v of result:
// the version (its id names the host), the latest marker, the evaluated
// definition and the run's record.
func (s *swampHost) run(v int) {
	s.t.Helper()
	id := fmt.Sprintf("%s-%d", s.name, v)
	s.write(fmt.Sprintf("%s/%d/metadata.yaml", rnData, v), fmt.Sprintf("id: %s\nname: result\nversion: %d\ncontentType: application/json\ntags:\n  version: keep\n  workflowId: wf1\n  workflowRunId: run-%s\n", id, v, id))
	s.write(fmt.Sprintf("workflow-runs/wf1/workflow-run-run-%s.yaml", id), fmt.Sprintf(
		"id: run-%s\nstatus: succeeded\njobs:\n  - name: main\n    steps:\n      - name: s\n        dataArtifacts:\n          - dataId: %s\n            name: result\n            version: %d\n", id, id, v))
	s.write(fmt.Sprintf("%s/%d/raw", rnData, v), "run on "+s.name)
	s.write(rnData+"/latest", fmt.Sprint(v))
	s.write(rnDef, fmt.Sprintf("evaluated on %s for %d", s.name, v))
	s.write(fmt.Sprintf("outputs/command/shell/execute/m1-%s.yaml", id), fmt.Sprintf(
		"id: rec-%s\nartifacts:\n  dataArtifacts:\n    - dataId: %s\n      name: result\n      version: %d\n    - dataId: other\n      name: log\n      version: %d\nlogFile: >-\n  .swamp/outputs/x.log\n", id, id, v, v))
}

func (s *swampHost) commit() {
	s.t.Helper()
	if _, err := s.h.Commit(testCtx(s.t), host.CommitOptions{Message: "run"}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *swampHost) sync() (host.SyncResult, Renumbered, error) {
	s.t.Helper()
	return SyncRenumbered(testCtx(s.t), s.h, host.SyncOptions{})
}

// versionsOf is what the cache holds of the result data: version → raw.
func (s *swampHost) versionsOf() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	des, err := os.ReadDir(filepath.Join(s.root, filepath.FromSlash(rnData)))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, de := range des {
		if de.IsDir() {
			meta := s.read(rnData + "/" + de.Name() + "/metadata.yaml")
			if !strings.Contains(meta, "\nversion: "+de.Name()+"\n") {
				s.t.Errorf("%s: version %s's metadata.yaml says otherwise:\n%s", s.name, de.Name(), meta)
			}
			out[de.Name()] = s.read(rnData + "/" + de.Name() + "/raw")
		}
	}
	return out
}

// TestSyncRenumbered: two hosts write version 2 of one data name while apart;
// b publishes first. a's sync moves its run to version 3 (directory,
// metadata.yaml, latest marker, run record) and takes b's evaluated
// definition; a's commit then publishes its run, and both caches hold both.
func TestSyncRenumbered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := newSwampHost(t, e, "a"), newSwampHost(t, e, "b")
	a.run(1)
	a.commit()
	if _, _, err := b.sync(); err != nil {
		t.Fatal(err)
	}
	a.run(2)
	a.run(3) // a second run while apart: it moves too, after the first
	b.run(2)
	b.commit()

	if _, err := a.h.Sync(testCtx(t), host.SyncOptions{}); !errors.As(err, new(*host.LocalChangesError)) {
		t.Fatalf("a plain sync: %v, want local changes", err)
	}
	_, rn, err := a.sync()
	if err != nil {
		t.Fatal(err)
	}
	want := Renumbered{Moved: []Move{{rnData, 2, 3}, {rnData, 3, 4}}, Regenerated: []string{rnData + "/latest", rnDef}}
	if diff := cmp.Diff(want, rn); diff != "" {
		t.Fatalf("renumbered (-want +got):\n%s", diff)
	}
	runs := map[string]string{"1": "run on a", "2": "run on b", "3": "run on a", "4": "run on a"}
	if diff := cmp.Diff(runs, a.versionsOf()); diff != "" {
		t.Fatalf("a's versions (-want +got):\n%s", diff)
	}
	if got := a.read(rnData + "/latest"); got != "4" {
		t.Fatalf("a's latest marker %q, want 4", got)
	}
	if got := a.read(rnDef); got != "evaluated on b for 2" {
		t.Fatalf("a's evaluated definition %q, want b's", got)
	}
	rec := a.read("outputs/command/shell/execute/m1-a-2.yaml")
	if !strings.Contains(rec, "dataId: a-2\n      name: result\n      version: 3\n") || !strings.Contains(rec, "dataId: other\n      name: log\n      version: 2\n") {
		t.Fatalf("a's run record of its moved version 2 (now 3):\n%s", rec)
	}
	if rec := a.read("workflow-runs/wf1/workflow-run-run-a-3.yaml"); !strings.Contains(rec, "dataId: a-3\n            name: result\n            version: 4\n") {
		t.Fatalf("a's workflow run record of its moved version 3 (now 4):\n%s", rec)
	}
	if got := a.read(rnData + "/3/metadata.yaml"); !strings.Contains(got, "id: a-2\n") || !strings.Contains(got, "  version: keep\n") {
		t.Fatalf("moved metadata.yaml lost its other fields:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(a.root, ".syncledger", SetAsideDir)); err == nil {
		t.Fatal("the set-aside directory is left behind")
	}
	if _, err := os.Stat(filepath.Join(a.root, ".syncledger", host.ConflictsDir)); err == nil {
		t.Fatal("a regenerated file was kept as a conflict")
	}

	a.commit()
	if _, rn, err := b.sync(); err != nil || len(rn.Moved)+len(rn.Regenerated) != 0 {
		t.Fatalf("b's sync: %+v, %v", rn, err)
	}
	if diff := cmp.Diff(runs, b.versionsOf()); diff != "" {
		t.Fatalf("b's versions (-want +got):\n%s", diff)
	}
	files := func(root string) map[string]string {
		m := hashTree(t, root)
		maps.DeleteFunc(m, func(p, _ string) bool { return strings.HasPrefix(p, ".syncledger/") })
		return m
	}
	if diff := cmp.Diff(files(a.root), files(b.root)); diff != "" {
		t.Fatalf("caches differ (-a +b):\n%s", diff)
	}
}

// TestSyncRenumberedLeavesOthers: a local change the ledger changed too that
// swamp's layout does not explain (a published version edited by hand) stays
// a LocalChangesError, whatever else was settled.
func TestSyncRenumberedLeavesOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := newSwampHost(t, e, "a"), newSwampHost(t, e, "b")
	a.run(1)
	a.commit()
	if _, _, err := b.sync(); err != nil {
		t.Fatal(err)
	}
	a.write(rnData+"/1/raw", "edited by hand")
	b.write(rnData+"/1/raw", "edited on b")
	b.commit()
	_, _, err := a.sync()
	var le *host.LocalChangesError
	if !errors.As(err, &le) || !cmp.Equal(le.Paths, []string{rnData + "/1/raw"}) {
		t.Fatalf("sync over a hand edit: %v, want local changes at %s", err, rnData+"/1/raw")
	}
	if got := a.read(rnData + "/1/raw"); got != "edited by hand" {
		t.Fatalf("the hand edit became %q", got)
	}
}

// TestSyncRenumberedAfterCrash: versions set aside by a sync that stopped
// before placing them are placed by the next one.
func TestSyncRenumberedAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := newSwampHost(t, e, "a")
	a.run(1)
	a.commit()
	a.run(2)
	stamp := filepath.Join(a.root, ".syncledger", SetAsideDir, "20260101T000000.000000000Z")
	aside := filepath.Join(stamp, filepath.FromSlash(rnData))
	if err := os.MkdirAll(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(a.root, filepath.FromSlash(rnData), "2"), filepath.Join(aside, "2")); err != nil {
		t.Fatal(err)
	}
	// A version swamp did not finish (killed before its metadata.yaml) is
	// moved too, as it is.
	if err := os.MkdirAll(filepath.Join(aside, "3"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aside, "3", "raw"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	list := fmt.Sprintf(`[{"data":%q,"from":2},{"data":%q,"from":3},{"data":%q,"from":4}]`, rnData, rnData, rnData)
	if err := os.WriteFile(filepath.Join(stamp, movesFile), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rn, err := a.sync()
	if err != nil {
		t.Fatal(err)
	}
	// 4 was listed but never set aside: left where it is (absent).
	if diff := cmp.Diff([]Move{{rnData, 2, 2}, {rnData, 3, 3}}, rn.Moved); diff != "" {
		t.Fatalf("moved (-want +got):\n%s", diff)
	}
	if got := a.read(rnData + "/2/raw"); got != "run on a" {
		t.Fatalf("version 2: %q", got)
	}
	if got := a.read(rnData + "/3/raw"); got != "partial" {
		t.Fatalf("version 3: %q", got)
	}
	if _, err := os.Stat(filepath.Join(a.root, ".syncledger", SetAsideDir)); err == nil {
		t.Fatal("the set-aside directory is left behind")
	}
}

// TestCommitRenumbered: a commit that meets another host's run of the same
// version (published first) moves this host's run past it and publishes it.
func TestCommitRenumbered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := newSwampHost(t, e, "a"), newSwampHost(t, e, "b")
	a.run(1)
	a.commit()
	if _, _, err := b.sync(); err != nil {
		t.Fatal(err)
	}
	a.run(2)
	b.run(2)
	b.commit()
	if _, err := a.h.Commit(testCtx(t), host.CommitOptions{}); !errors.As(err, new(*host.ConflictError)) {
		t.Fatalf("a plain commit: %v, want a conflict", err)
	}
	res, rn, err := CommitRenumbered(testCtx(t), a.h, host.CommitOptions{Message: "run"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Move{{rnData, 2, 3}}, rn.Moved); diff != "" || res.Nothing {
		t.Fatalf("moved (-want +got):\n%s; commit %+v", diff, res)
	}
	if _, _, err := b.sync(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"1": "run on a", "2": "run on b", "3": "run on a"}, b.versionsOf()); diff != "" {
		t.Fatalf("b's versions (-want +got):\n%s", diff)
	}
}

// TestHealRenumbers is issue 39's restore with swamp's layout: after a backup,
// a published version 2, b synced it and published version 3; the server
// was restored from the backup and c published its own version 2. b's pull
// heals: its version 3 goes back as 3, a's version 2 moves past the ledger's
// (4), records renumbered, both published. a's pull then finds its version 2
// in the ledger as 4 and drops its copy (no duplicate run); every host ends
// with every run, once.
func TestHealRenumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := newSwampHost(t, e, "a"), newSwampHost(t, e, "b"), newSwampHost(t, e, "c")
	a.run(1)
	a.commit()
	for _, h := range []*swampHost{b, c} {
		if _, _, err := h.sync(); err != nil {
			t.Fatal(err)
		}
	}
	backup, _ := e.log.LastSeq(testCtx(t))
	a.run(2)
	a.commit()
	if _, _, err := b.sync(); err != nil {
		t.Fatal(err)
	}
	b.run(3)
	b.commit()
	e.log.(interface{ Rewind(ledger.Seq) }).Rewind(backup)
	c.run(2)
	c.commit()

	pull := func(s *swampHost) (host.SyncResult, Renumbered) {
		t.Helper()
		res, rn, err := s.sync()
		if err != nil {
			t.Fatalf("%s's pull: %v", s.name, err)
		}
		if _, _, err := CommitRenumbered(testCtx(t), s.h, host.CommitOptions{Message: host.RepublishMessage}); err != nil {
			t.Fatalf("%s's commit after its pull: %v", s.name, err)
		}
		return res, rn
	}
	res, rn := pull(b)
	if res.Healed == nil || !cmp.Equal(rn.Moved, []Move{{rnData, 2, 4}}) {
		t.Fatalf("b's pull: healed %+v, renumbered %+v; want a's version 2 moved to 4", res.Healed, rn)
	}
	res, rn = pull(a)
	if res.Healed == nil || len(rn.Moved) != 0 || !cmp.Equal(rn.Duplicates, []Move{{rnData, 2, 4}}) {
		t.Fatalf("a's pull: healed %+v, renumbered %+v; want its version 2 found as 4", res.Healed, rn)
	}
	pull(c)
	runs := map[string]string{"1": "run on a", "2": "run on c", "3": "run on b", "4": "run on a"}
	files := func(root string) map[string]string {
		m := hashTree(t, root)
		maps.DeleteFunc(m, func(p, _ string) bool { return strings.HasPrefix(p, ".syncledger/") })
		return m
	}
	for _, s := range []*swampHost{a, b, c} {
		if _, _, err := s.sync(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(runs, s.versionsOf()); diff != "" {
			t.Fatalf("%s's versions (-want +got):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(files(c.root), files(s.root)); diff != "" {
			t.Fatalf("%s's cache differs from c's (-c +%s):\n%s", s.name, s.name, diff)
		}
	}
	if rec := c.read("outputs/command/shell/execute/m1-a-2.yaml"); !strings.Contains(rec, "dataId: a-2\n      name: result\n      version: 4\n") {
		t.Fatalf("a's run record, republished:\n%s", rec)
	}
}

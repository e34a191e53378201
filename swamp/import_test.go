package swamp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

func TestImportFixtures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture    string
		ns         string
		format     Format
		internal   []string
		namespaces []string
		mismatches []string
		missing    []string
	}{
		{fixture: "v2", format: FormatV2, internal: []string{"_catalog.db"}},
		{fixture: "v1", format: FormatV1, internal: []string{"data/aws/ec2/vpc/abc-123/.lock"}},
		{fixture: "namespaced", ns: "team-a", format: FormatV2},
		{fixture: "listing", format: FormatListing,
			internal: []string{".datastore.lock", ".locks/other.lock", ".namespace.json", "_catalog.db", "_catalog.db-shm",
				"_catalog.db-wal", "_control/host-registry.json", "data/aws/ec2/vpc/abc-123/.lock"},
			namespaces: []string{"team-x"}},
		{fixture: "mismatch", format: FormatV2, mismatches: []string{"audit/bad.jsonl"}, missing: []string{"audit/gone.jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			e := newEnv(t)
			src := fileStore(t, fixture(t, tt.fixture))
			var progress []ImportProgress
			cfg := e.importConfig(src, tt.ns)
			cfg.Progress = func(p ImportProgress) { progress = append(progress, p) }
			sum, err := Import(testCtx(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			st := readLedger(t, e)
			if diff := cmp.Diff(readWant(t, tt.fixture), golden(st.files)); diff != "" {
				t.Fatalf("ledger files (-want +got):\n%s", diff)
			}
			wantOneCommitEach(t, st)
			var mm []string
			for _, m := range sum.Mismatches {
				mm = append(mm, m.Path)
			}
			got := []any{sum.Format, sum.Internal, sum.Namespaces, mm, sum.Missing, sum.Committed, len(progress), sum.Complete()}
			want := []any{tt.format, tt.internal, tt.namespaces, tt.mismatches, tt.missing, len(st.commits), sum.Partitions,
				len(tt.mismatches)+len(tt.missing) == 0}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("summary (-want +got):\n%s\n%+v", diff, sum)
			}
			if sum.Files != len(st.files)+len(tt.mismatches)+len(tt.missing) {
				t.Fatalf("summary files %d, ledger has %d", sum.Files, len(st.files))
			}

			// Idempotent: a second run publishes nothing.
			again, err := Import(testCtx(t), e.importConfig(src, tt.ns))
			if err != nil {
				t.Fatal(err)
			}
			if again.Committed != 0 || again.Unchanged != again.Partitions {
				t.Fatalf("second run: %+v", again)
			}
			if st2 := readLedger(t, e); st2.last != st.last {
				t.Fatalf("second run moved the log from %d to %d", st.last, st2.last)
			}
		})
	}
}

func TestImportSkipsOtherNamespaces(t *testing.T) {
	t.Parallel()
	// The namespaced fixture read in solo mode: a listing that skips both
	// namespaces and the .locks/ directory, importing nothing.
	e := newEnv(t)
	sum, err := Import(testCtx(t), e.importConfig(fileStore(t, fixture(t, "namespaced")), ""))
	if !errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), "team-a, team-b: use --namespace") {
		t.Fatalf("import: %v", err)
	}
	if diff := cmp.Diff([]string{"team-a", "team-b"}, sum.Namespaces); diff != "" {
		t.Fatalf("namespaces (-want +got):\n%s", diff)
	}
	if sum.Format != FormatListing || sum.Files != 0 || sum.Committed != 0 || len(sum.Internal) != 1 {
		t.Fatalf("summary: %+v", sum)
	}
}

func TestImportAcceptMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.importConfig(fileStore(t, fixture(t, "mismatch")), "")
	cfg.AcceptMismatch = true
	sum, err := Import(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := readLedger(t, e)
	if len(sum.Mismatches) != 1 || !sum.Mismatches[0].Imported || st.files["audit/bad.jsonl"].Size != int64(len("what the object holds\n")) {
		t.Fatalf("summary %+v, files %v", sum, st.files)
	}
	if sum.Complete() {
		t.Fatal("complete with a missing object")
	}
}

func TestImportResumesAfterCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := fileStore(t, fixture(t, "v2"))
	for _, k := range []int{1, 4} {
		ctx, cancel := context.WithCancel(testCtx(t))
		cfg := e.importConfig(src, "")
		cfg.Progress = func(p ImportProgress) {
			if p.Done == k {
				cancel()
			}
		}
		sum, err := Import(ctx, cfg)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled import: %v", err)
		}
		if sum.Committed+sum.Unchanged != k {
			t.Fatalf("cancelled after %d partitions: %+v", k, sum)
		}
	}
	sum, err := Import(testCtx(t), e.importConfig(src, ""))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Unchanged != 4 || sum.Committed != sum.Partitions-4 {
		t.Fatalf("resumed: %+v", sum)
	}
	st := readLedger(t, e)
	wantOneCommitEach(t, st)
	if diff := cmp.Diff(readWant(t, "v2"), golden(st.files)); diff != "" {
		t.Fatalf("ledger files (-want +got):\n%s", diff)
	}
}

func TestImportDeltaAndConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := copyDir(t, fixture(t, "listing"))
	src := fileStore(t, dir)
	if _, err := Import(testCtx(t), e.importConfig(src, "")); err != nil {
		t.Fatal(err)
	}
	// The source changes: one file rewritten, one removed, in two partitions.
	write := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("audit/2026-01-01.jsonl", "rewritten\n")
	if err := os.Remove(filepath.Join(dir, "workflows-evaluated", "workflow-deploy.yaml")); err != nil {
		t.Fatal(err)
	}
	sum, err := Import(testCtx(t), e.importConfig(src, ""))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Committed != 1 || len(sum.Commits) != 1 || sum.Commits[0].Partition != "audit" {
		t.Fatalf("delta import: %+v", sum)
	}
	st := readLedger(t, e)
	if got := st.files["audit/2026-01-01.jsonl"]; got.Size != int64(len("rewritten\n")) {
		t.Fatalf("audit file: %+v", got)
	}
	if len(st.commits["audit"]) != 2 {
		t.Fatalf("audit commits: %v", st.commits["audit"])
	}
	// workflows-evaluated lost its only file: a listing no longer has the
	// partition at all, so the ledger keeps it (nothing to compare with).

	// A host commits to audit; the source changes audit again: merged (the
	// host's file kept, the source's change taken).
	e.commit(t, map[string][]byte{"audit/host.jsonl": []byte("from a host\n")})
	write("audit/2026-01-01.jsonl", "rewritten again\n")
	sum, err = Import(testCtx(t), e.importConfig(src, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Conflicts) != 0 || sum.Committed != 1 || !sum.Complete() {
		t.Fatalf("merge into a host's commit: %+v", sum)
	}
	st = readLedger(t, e)
	if got := st.files["audit/2026-01-01.jsonl"]; got.Size != int64(len("rewritten again\n")) || st.files["audit/host.jsonl"].Size == 0 {
		t.Fatalf("after the merge: %+v", st.files)
	}
	// Run again: nothing to take.
	if sum, err = Import(testCtx(t), e.importConfig(src, "")); err != nil || sum.Committed != 0 || len(sum.Conflicts) != 0 {
		t.Fatalf("a second run after a merge: %+v, %v", sum, err)
	}

	// The host and the source both change one file: a conflict, untouched,
	// unless the ledger's is kept (KeepLedger); a file swamp regenerates is
	// the ledger's without asking.
	e.commit(t, map[string][]byte{"audit/2026-01-01.jsonl": []byte("the host's\n"), "audit/host.jsonl": []byte("from a host, again\n")})
	write("audit/2026-01-01.jsonl", "the source's\n")
	write("audit/new.jsonl", "new in the source\n")
	before := readLedger(t, e)
	sum, err = Import(testCtx(t), e.importConfig(src, ""))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"audit"}, sum.Conflicts); diff != "" || sum.Complete() || !slices.Equal(sum.Collisions, []string{"audit/2026-01-01.jsonl"}) {
		t.Fatalf("conflicts (-want +got):\n%s\n%+v", diff, sum)
	}
	if diff := cmp.Diff(before.files, readLedger(t, e).files); diff != "" {
		t.Fatalf("a conflict changed the partition:\n%s", diff)
	}
	cfg := e.importConfig(src, "")
	cfg.KeepLedger = true
	if sum, err = Import(testCtx(t), cfg); err != nil || !sum.Complete() || sum.Committed != 1 || !slices.Equal(sum.KeptLedger, []string{"audit/2026-01-01.jsonl"}) {
		t.Fatalf("with KeepLedger: %+v, %v", sum, err)
	}
	st = readLedger(t, e)
	if st.files["audit/2026-01-01.jsonl"].Size != int64(len("the host's\n")) || st.files["audit/new.jsonl"].Size == 0 {
		t.Fatalf("with KeepLedger: %+v", st.files)
	}
	for _, tc := range []struct {
		rel  string
		want bool
	}{{"definitions-evaluated/command/shell/vpc.yaml", true}, {"data/command/shell/id/result/latest", true},
		{"data/command/shell/id/result/1/raw", false}, {"outputs/command/shell/execute/x.yaml", false}} {
		if Regenerated(tc.rel) != tc.want {
			t.Errorf("Regenerated(%s) = %v", tc.rel, !tc.want)
		}
	}
}

func TestImportLargePartitionUsesManifest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.blobs = newMemStore() // a thousand fsyncs would dominate
	src := newMemStore()
	pad := strings.Repeat("a-rather-long-name-to-fill-the-event-", 5)
	for i := range 1000 {
		b := []byte(itoa(i))
		if err := src.PutObject(testCtx(t), "audit/"+pad+itoa(i)+".jsonl", bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := Import(testCtx(t), e.importConfig(src, ""))
	if err != nil {
		t.Fatal(err)
	}
	st := readLedger(t, e)
	if sum.Committed != 1 || len(st.files) != 1000 {
		t.Fatalf("summary %+v, %d files", sum, len(st.files))
	}
	head, err := e.log.PartitionHead(testCtx(t), "audit")
	if err != nil || head.Event.Manifest.IsZero() {
		t.Fatalf("head %+v, %v: want a manifest", head.Event.Manifest, err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

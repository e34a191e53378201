package swamp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/jetstream"
	"github.com/syncledger/syncledger/ledger/jetstream/jstest"
)

// TestImportKilledAndRerun kills an import with SIGKILL after it has handled
// half of the partitions (while it copies the next one), runs it again, and
// compares the ledger with an uninterrupted import's.
func TestImportKilledAndRerun(t *testing.T) {
	if os.Getenv("SWAMP_IMPORT_CHILD") != "" {
		t.Skip("in the child")
	}
	t.Parallel()
	srv, nc := jstest.RunServer(t)
	killed := newLedgerOn(t, nc)
	whole := newLedgerOn(t, nc)
	src := fixture(t, "v2")

	cmd := exec.Command(os.Args[0], "-test.run=^TestImportChild$")
	cmd.Env = append(os.Environ(), "SWAMP_IMPORT_CHILD=1", "SWAMP_NATS="+srv.ClientURL(),
		"SWAMP_LEDGER="+killed.log.Name(), "SWAMP_BLOBS="+killed.dir, "SWAMP_SRC="+src)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const half = 4
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == fmt.Sprintf("done %d", half) {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	go io.Copy(io.Discard, out)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v (want killed)", err)
	}
	mid := readLedger(t, killed)
	if n := len(mid.commits); n < half || n == 9 {
		t.Fatalf("killed after %d partitions, ledger has %d", half, n)
	}

	srcStore := fileStore(t, src)
	sum, err := Import(testCtx(t), killed.importConfig(srcStore, ""))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Unchanged < half || sum.Committed+sum.Unchanged != sum.Partitions {
		t.Fatalf("re-run: %+v", sum)
	}
	if _, err := Import(testCtx(t), whole.importConfig(srcStore, "")); err != nil {
		t.Fatal(err)
	}
	a, b := readLedger(t, killed), readLedger(t, whole)
	wantOneCommitEach(t, a)
	if diff := cmp.Diff(entryDigests(b.files), entryDigests(a.files)); diff != "" {
		t.Fatalf("killed+rerun vs uninterrupted (-whole +killed):\n%s", diff)
	}
	if len(a.commits) != len(b.commits) || a.last != b.last {
		t.Fatalf("partitions %d vs %d, last seq %d vs %d", len(a.commits), len(b.commits), a.last, b.last)
	}
}

// TestImportChild is the process TestImportKilledAndRerun kills: an import of
// SWAMP_SRC whose object reads are slowed down, printing "done N" after each
// partition.
func TestImportChild(t *testing.T) {
	if os.Getenv("SWAMP_IMPORT_CHILD") == "" {
		t.Skip("the child process of TestImportKilledAndRerun")
	}
	ctx := context.Background()
	nc := jstest.Connect(t, os.Getenv("SWAMP_NATS"))
	l, err := jetstream.Open(ctx, nc, os.Getenv("SWAMP_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := ImportConfig{
		Source:     slowStore{fileStore(t, os.Getenv("SWAMP_SRC"))},
		SourceName: "test", Log: l, Blobs: ledger.NewBlobStore(fileStore(t, os.Getenv("SWAMP_BLOBS"))),
		Host: "importer", Parallel: 1,
		Progress: func(p ImportProgress) { fmt.Printf("done %d\n", p.Done) },
	}
	if _, err := Import(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

type slowStore struct{ ledger.ObjectStore }

func (s slowStore) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	time.Sleep(100 * time.Millisecond)
	return s.ObjectStore.GetObject(ctx, key)
}

package swamp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestImportKilledAndRerun kills an import with SIGKILL after it has handled
// half of the partitions, while it copies the next one (one of that
// partition's two objects stored, no commit), runs it again, and compares the
// ledger with an uninterrupted import's.
func TestImportKilledAndRerun(t *testing.T) {
	if os.Getenv("SWAMP_IMPORT_CHILD") != "" {
		t.Skip("in the child")
	}
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	killed := newNATSLedger(t, nc)
	whole := newNATSLedger(t, nc)
	src := fixture(t, "v2")
	const half = 4 // the 5th partition in key order, data--command--shell--consumer-1, has two objects

	cmd := exec.Command(os.Args[0], "-test.run=^TestImportChild$")
	cmd.Env = append(os.Environ(), "SWAMP_IMPORT_CHILD=1", "SWAMP_NATS="+srv.ClientURL(),
		"SWAMP_LEDGER="+killed.name, "SWAMP_BLOBS="+killed.dir, "SWAMP_SRC="+src,
		fmt.Sprintf("SWAMP_STALL_AFTER=%d", half))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // a failure below leaves no child behind
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		if l := sc.Text(); l == "stalled" || strings.HasPrefix(l, "done ") {
			lines = append(lines, l)
		}
		if sc.Text() == "stalled" {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	go io.Copy(io.Discard, out)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v (want killed); its output: %q", err, lines)
	}
	if want := []string{"done 1", "done 2", "done 3", "done 4", "stalled"}; !slices.Equal(lines, want) {
		t.Fatalf("child printed %q, want %q", lines, want)
	}
	mid := readLedger(t, killed.env)
	if n := len(mid.commits); n != half {
		t.Fatalf("killed after %d partitions, ledger has %d", half, n)
	}
	// The kill landed inside the 5th partition's copy: its first object is in
	// the blob store, its second is not, and nothing of it was committed.
	for name, want := range map[string]bool{"metadata.yaml": true, "raw": false} {
		b, err := os.ReadFile(filepath.Join(src, "data/command/shell/consumer-1/out/1", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := killed.blobs.Stat(testCtx(t), ledger.DigestOf(b)); (err == nil) != want {
			t.Fatalf("blob of consumer-1's %s after the kill: %v, want stored %v", name, err, want)
		}
	}

	srcStore := fileStore(t, src)
	sum, err := Import(testCtx(t), killed.importConfig(srcStore, ""))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Unchanged != half || sum.Committed+sum.Unchanged != sum.Partitions {
		t.Fatalf("re-run: %+v", sum)
	}
	if _, err := Import(testCtx(t), whole.importConfig(srcStore, "")); err != nil {
		t.Fatal(err)
	}
	a, b := readLedger(t, killed.env), readLedger(t, whole.env)
	wantOneCommitEach(t, a)
	if diff := cmp.Diff(entryDigests(b.files), entryDigests(a.files)); diff != "" {
		t.Fatalf("killed+rerun vs uninterrupted (-whole +killed):\n%s", diff)
	}
	if len(a.commits) != len(b.commits) || a.last != b.last {
		t.Fatalf("partitions %d vs %d, last seq %d vs %d", len(a.commits), len(b.commits), a.last, b.last)
	}
}

// TestImportChild is the process TestImportKilledAndRerun kills: an import of
// SWAMP_SRC, one object at a time, printing "done N" after each partition.
// Once SWAMP_STALL_AFTER partitions are done it copies one more object, then
// prints "stalled" and waits in the next object's read until it is killed.
func TestImportChild(t *testing.T) {
	if os.Getenv("SWAMP_IMPORT_CHILD") == "" {
		t.Skip("the child process of TestImportKilledAndRerun")
	}
	ctx := context.Background()
	after, err := strconv.Atoi(os.Getenv("SWAMP_STALL_AFTER"))
	if err != nil {
		t.Fatal(err)
	}
	nc := natsjstest.Connect(t, os.Getenv("SWAMP_NATS"))
	l, err := natsjs.OpenLog(ctx, nc, os.Getenv("SWAMP_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	st := &stallStore{}
	cfg := ImportConfig{
		Source:     fileStore(t, os.Getenv("SWAMP_SRC")).View(func(d driver.Bucket) driver.Bucket { st.Bucket = d; return st }),
		SourceName: "test", Log: l, Blobs: fileStore(t, os.Getenv("SWAMP_BLOBS")),
		Host: "importer", Parallel: 1,
		Progress: func(p ImportProgress) {
			fmt.Printf("done %d\n", p.Done)
			if p.Done == after {
				st.armed.Store(true)
			}
		},
	}
	if _, err := Import(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("the import finished; it should have stalled after %d partitions", after)
}

// stallStore, once armed, lets one more object be read and stalls in the read
// after it.
type stallStore struct {
	driver.Bucket
	armed atomic.Bool
	reads atomic.Int64 // since armed
}

func (s *stallStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if s.armed.Load() && s.reads.Add(1) == 2 {
		fmt.Println("stalled")
		time.Sleep(testTimeout) // killed long before
		return nil, fmt.Errorf("not killed within %v", testTimeout)
	}
	return s.Bucket.Get(ctx, key)
}

// natsLedger is an env whose ledger is on a nats-server, which processes share.
type natsLedger struct {
	*env
	name string
}

func newNATSLedger(t testing.TB, nc *nats.Conn) natsLedger {
	t.Helper()
	dir := t.TempDir()
	name := fmt.Sprintf("swamp%d", ledgerN.Add(1))
	l, err := natsjs.CreateLog(testCtx(t), nc, natsjs.LedgerConfig{Name: name, Blobs: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	return natsLedger{env: &env{log: l, blobs: fileStore(t, dir), dir: dir}, name: name}
}

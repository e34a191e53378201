package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/internal/smallfs"
	"github.com/syncledger/syncledger/ledger"
)

// TestSyncFullCache (SYNCLEDGER_TEST_DISKFULL, root): a host whose cache's
// disk fills during a pull stops with a *NoSpaceError saying the free space
// and what the rest of the pull writes; what it applied before stays; once
// space is freed the next sync converges.
func TestSyncFullCache(t *testing.T) {
	dir := smallfs.MountT(t, 16<<20)
	e := newEnv(t)
	a := e.host("a")
	var total int64
	for c := range 3 {
		for i := range 4 {
			b := make([]byte, 512<<10)
			rand.Read(b)
			writeFile(t, a, fmt.Sprintf("data/m%d/f%d", c, i), string(b))
			total += int64(len(b))
		}
		mustCommit(t, a, fmt.Sprint("c", c))
	}
	filler := filepath.Join(dir, "filler")
	if _, err := smallfs.Fill(filler, 3<<20); err != nil {
		t.Fatal(err)
	}
	b := e.hostAt("b", filepath.Join(dir, "cache"))
	_, err := b.Sync(context.Background(), SyncOptions{})
	var ns *NoSpaceError
	if !errors.As(err, &ns) {
		t.Fatalf("sync into a full cache: %v, want a NoSpaceError", err)
	}
	t.Logf("sync into a full cache: %v", err)
	hwm := hwmOf(t, b)
	applied := int64(hwm) * 4 * 512 << 10 // each commit is one seq here (one partition)
	if ns.Dir != b.Dir().Root() && ns.Dir != filepath.Join(dir, "cache") {
		t.Errorf("NoSpaceError.Dir = %q", ns.Dir)
	}
	if ns.Need != total-applied || ns.Files != int(12-4*hwm) || ns.From != hwm+1 || ns.To != 3 {
		t.Errorf("the rest of the pull: %d bytes in %d files, seqs %d..%d; want %d bytes in %d files from seq %d to 3 (hwm %d)",
			ns.Need, ns.Files, ns.From, ns.To, total-applied, 12-4*hwm, hwm+1, hwm)
	}
	if ns.Short() == 0 || !strings.Contains(err.Error(), "the cache's disk is full") || !strings.Contains(err.Error(), "is "+ledger.Bytes(uint64(ns.Need))+" in ") {
		t.Errorf("the error does not say what the pull needs: %v (short %d)", err, ns.Short())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Errorf("the caches differ after space was freed (-a +b):\n%s", diff)
	}
}

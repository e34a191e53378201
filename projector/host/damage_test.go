package host

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/statedb"
)

// TestDamagedStateRecovery (issue 26 point 7): a damaged state database fails
// every operation with statedb.ErrCorrupt, never a panic; a rebuild
// interrupted after it started the state over leaves a state every
// operation but rebuild and sync refuses; the sync finishes the rebuild,
// keeping the uncommitted edit under .syncledger/conflicts/, and the host
// ends with the ledger's files, nothing dirty, its HWM at the head.
func TestDamagedStateRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	for _, p := range []string{"audit/x", "audit/y", vpcRaw, vpcMeta} {
		writeFile(t, a, p, "from a: "+p)
	}
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	writeFile(t, b, "audit/x", "b's uncommitted edit")
	writeFile(t, a, vpcMeta, "a's newer version")
	mustCommit(t, a, "")

	b.Release()
	path := b.Dir().StatePath("state.db")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int(binary.LittleEndian.Uint32(raw[16+8:]))
	for off := 2 * size; off < len(raw); off += size {
		raw[off] ^= 0xff // every page's id
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Status(ctx); !errors.Is(err, statedb.ErrCorrupt) {
		t.Fatalf("status on a damaged state: %v, want ErrCorrupt", err)
	}

	// A rebuild stopped right after it started the state over.
	damaged, err := b.checkState()
	if err != nil || damaged == "" {
		t.Fatalf("checkState = %q, %v", damaged, err)
	}
	if _, err := b.Status(ctx); !errors.Is(err, statedb.ErrCorrupt) {
		t.Fatalf("status on a state whose rebuild did not finish: %v, want ErrCorrupt", err)
	}
	if _, err := b.Commit(ctx, CommitOptions{}); !errors.Is(err, statedb.ErrCorrupt) {
		t.Fatalf("commit on a state whose rebuild did not finish: %v, want ErrCorrupt", err)
	}
	res := mustSync(t, b, SyncOptions{})
	if !res.Rebuilt {
		t.Fatalf("sync did not finish the rebuild: %+v", res)
	}
	kept, err := filepath.Glob(filepath.Join(b.Dir().StatePath(ConflictsDir), "*", "audit", "x"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept copies %v, %v", kept, err)
	}
	if got, _ := os.ReadFile(kept[0]); string(got) != "b's uncommitted edit" {
		t.Fatalf("kept %q", got)
	}
	want := cacheFiles(t, a)
	got := cacheFiles(t, b)
	if len(got) != len(want) {
		t.Fatalf("b holds %v, a %v", got, want)
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("b's %s = %q, want %q", p, got[p], c)
		}
	}
	st := mustStatus(t, b)
	head, err := e.log.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Dirty) != 0 || st.HWM != head || st.HWM == ledger.Seq(0) {
		t.Fatalf("status after recovery: dirty %v, hwm %d, head %d", st.Dirty, st.HWM, head)
	}
}

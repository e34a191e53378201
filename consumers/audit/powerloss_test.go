//go:build linux

package audit_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/syncledger/syncledger/consumers/audit"
	"github.com/syncledger/syncledger/internal/lazyfs"
	"github.com/syncledger/syncledger/ledger"
)

// TestPowerLossAudit: the audit file keeps every flushed commit (what the
// Runner acknowledges) across power cuts on a file system that drops what was
// not fsynced — the file's creation and each rotation included — and the
// writer, reopened, goes on from there: every acknowledged commit once, in
// order. It needs root and /dev/fuse; SYNCLEDGER_TEST_POWERLOSS=1 turns it on.
func TestPowerLossAudit(t *testing.T) {
	lfs, m := lazyfs.MountT(t)
	defer func() { _ = m.Unmount() }()
	dir := filepath.Join(m.Dir, "log")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if d, err := os.Open(m.Dir); err == nil { // the setup is durable
		_ = d.Sync()
		d.Close()
	}
	path := filepath.Join(dir, "audit.jsonl")
	var acked ledger.Seq // last seq a Flush returned for
	for cut := range 30 {
		w, err := audit.Open(audit.Config{Ledger: "l", Path: path, Sync: true, MaxSize: 32 << 10})
		if err != nil {
			t.Fatalf("cut %d: open: %v", cut, err)
		}
		if w.LastSeq() < acked {
			w.Close()
			t.Fatalf("cut %d: the file's last seq is %d, commits up to %d were acknowledged", cut, w.LastSeq(), acked)
		}
		// Delivery starts after the last acknowledged commit (a consumer's
		// ack floor); what was written beyond it is skipped.
		next := acked + 1
		for range 3 {
			handle(t, w, seqRange(next, next+4)...)
			next += 5
			acked = next - 1
		}
		// A batch handled but not flushed when the power goes.
		for _, s := range seqRange(next, next+2) {
			if err := w.Handle(t.Context(), commit(s)); err != nil {
				t.Fatal(err)
			}
		}
		w.Close() // the process dies: nothing more is flushed
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		lfs.Drop()
		if m, err = lfs.Mount(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(path + ".*")
	var seqs []ledger.Seq
	for _, f := range append(sortedRotated(files), path) {
		if filepath.Ext(f) == ".lock" {
			continue
		}
		seqs = append(seqs, readSeqs(t, f)...)
	}
	if !slices.Equal(seqs, seqRange(1, acked)) {
		t.Fatalf("after 30 cuts the audit files hold %d lines (%v…), want every acknowledged commit 1..%d once, in order", len(seqs), seqs[:min(len(seqs), 10)], acked)
	}
}

// sortedRotated orders rotated files by the seq in their name.
func sortedRotated(files []string) []string {
	slices.SortFunc(files, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		if a < b {
			return -1
		}
		return 1
	})
	return files
}

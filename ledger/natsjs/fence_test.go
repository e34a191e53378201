package natsjs

import (
	"errors"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// A ledger made by a release before fences is log format 1, which every
// release reads: it refuses fences (nothing stored, so older readers never
// meet a record they cannot read) and takes commits as before. The admin
// raises it (RaiseFormat) once every reader reads format 2; then it holds
// fences. A build refuses a format it does not read (TestOpenForeignStreams).
func TestFormatOneHoldsNoFences(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	l, err := CreateLog(ctx, nc, LedgerConfig{Name: "old"})
	if err != nil {
		t.Fatal(err)
	}
	// As a release before fences made it.
	if err := l.d.updateMeta(ctx, func(md map[string]string) bool { return md[MetaFormat] == "1" },
		func(md map[string]string) { md[MetaFormat] = "1" }); err != nil {
		t.Fatal(err)
	}
	old, err := OpenLog(ctx, nc, "old")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := old.Info(ctx); info.Format != 1 || info.Fenced() {
		t.Fatalf("Info of the old ledger = %+v", info)
	}
	rec := ledger.FenceRecord{V: ledger.FormatVersion, Ledger: old.UUID(), Lock: "m", ID: mkCommit(t, old, part{partition: "x", modelSeq: 1})[0].Commit, Host: "h", At: time.Now()}
	if _, err := old.TakeFence(ctx, rec); !errors.Is(err, ledger.ErrNoFences) {
		t.Fatalf("TakeFence on a format-1 ledger = %v, want ErrNoFences", err)
	}
	if _, err := old.Append(ctx, mkCommit(t, old, next(t, old, "a")), ledger.Fence{Lock: "m", Seq: 1}); !errors.Is(err, ledger.ErrNoFences) {
		t.Fatalf("fenced Append on a format-1 ledger = %v, want ErrNoFences", err)
	}
	if _, err := old.Append(ctx, mkCommit(t, old, next(t, old, "a"))); err != nil {
		t.Fatalf("Append on a format-1 ledger: %v", err)
	}
	if s := lastSeq(t, old); s != 1 {
		t.Fatalf("last seq %d, want 1: the refused fences stored something", s)
	}

	for _, want := range []int{1, ledger.LogFormat} { // the second: already raised
		had, err := old.RaiseFormat(ctx)
		if err != nil || had != want {
			t.Fatalf("RaiseFormat = %d, %v; want it had %d", had, err, want)
		}
	}
	raised, err := OpenLog(ctx, nc, "old")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := raised.Info(ctx); info.Format != ledger.LogFormat || !info.Fenced() {
		t.Fatalf("Info after RaiseFormat = %+v, want format %d", info, ledger.LogFormat)
	}
	seq, err := raised.TakeFence(ctx, rec)
	if err != nil {
		t.Fatalf("TakeFence after RaiseFormat: %v", err)
	}
	if _, err := raised.Append(ctx, mkCommit(t, raised, next(t, raised, "a")), ledger.Fence{Lock: "m", Seq: seq}); err != nil {
		t.Fatalf("fenced Append after RaiseFormat: %v", err)
	}
}

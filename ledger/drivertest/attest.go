package drivertest

import (
	"context"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// testLogAttest: a log attests snapshots' digests, keeps the newest
// ledger.MaxAttested, and a retention bound that only rises.
func testLogAttest(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	if a, err := l.Attested(ctx); err != nil || len(a.Snapshots) != 0 || a.Retained != 0 {
		t.Fatalf("Attested on a new ledger = %+v, %v; want none", a, err)
	}
	if err := l.AttestSnapshot(ctx, 0, ledger.DigestOf([]byte("x"))); err == nil {
		t.Error("AttestSnapshot at seq 0 accepted")
	}
	for seq := ledger.Seq(1); seq <= ledger.MaxAttested+2; seq++ {
		if err := l.AttestSnapshot(ctx, seq, ledger.DigestOf([]byte{byte(seq)})); err != nil {
			t.Fatalf("AttestSnapshot(%d): %v", seq, err)
		}
	}
	for _, r := range []ledger.Seq{7, 3} {
		if err := l.AttestRetention(ctx, r); err != nil {
			t.Fatalf("AttestRetention(%d): %v", r, err)
		}
	}
	a, err := l.Attested(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Snapshots) != ledger.MaxAttested || a.Snapshots[1] != (ledger.Digest{}) || a.Snapshots[ledger.MaxAttested+2] != ledger.DigestOf([]byte{ledger.MaxAttested + 2}) {
		t.Errorf("attested snapshots: %d, want the newest %d", len(a.Snapshots), ledger.MaxAttested)
	}
	if a.Retained != 7 {
		t.Errorf("retention bound %d, want 7 (it only rises)", a.Retained)
	}
	// The admin's correction sets it, lower or higher; 0 removes it.
	for _, r := range []ledger.Seq{2, 9, 0} {
		if err := l.SetRetention(ctx, r); err != nil {
			t.Fatalf("SetRetention(%d): %v", r, err)
		}
		if a, err := l.Attested(ctx); err != nil || a.Retained != r || len(a.Snapshots) != ledger.MaxAttested {
			t.Errorf("after SetRetention(%d): bound %d, %d snapshots, %v", r, a.Retained, len(a.Snapshots), err)
		}
	}
	if err := l.AttestRetention(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if a, _ := l.Attested(ctx); a.Retained != 5 {
		t.Errorf("AttestRetention(5) after the bound was removed: %d", a.Retained)
	}
}

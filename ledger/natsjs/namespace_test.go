package natsjs

import (
	"errors"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestNamespaceMark: a namespace's ledger carries its mark from creation
// (issue 38 point 11: setup adopted a plain ledger of the same name); a
// ledger made without it is marked once, never re-marked otherwise.
func TestNamespaceMark(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	const base, other = "6f1c2a4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f", "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b"

	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "bad", NamespaceOf: "x", Namespace: "eu"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Create with a malformed mark: %v", err)
	}
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "prod_eu", NamespaceOf: base, Namespace: "eu"}); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLog(ctx, nc, "prod_eu")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := l.Info(ctx); info.NamespaceOf != base || info.Namespace != "eu" {
		t.Fatalf("Info of a marked ledger: %+v", info)
	}
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "prod_eu", NamespaceOf: other, Namespace: "eu"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Create with another mark over a marked ledger: %v", err)
	}
	if err := l.MarkNamespace(ctx, other, "eu"); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("MarkNamespace over another mark: %v", err)
	}

	// A ledger made before the mark: none, then marked once.
	plain, err := CreateLog(ctx, nc, LedgerConfig{Name: "prod_old"})
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := plain.Info(ctx); info.NamespaceOf != "" || info.Namespace != "" {
		t.Fatalf("Info of an unmarked ledger: %+v", info)
	}
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "prod_old", NamespaceOf: base, Namespace: "old"}); err != nil {
		t.Fatalf("Create over an unmarked ledger (left to the caller): %v", err)
	}
	for range 2 { // idempotent
		if err := plain.MarkNamespace(ctx, base, "old"); err != nil {
			t.Fatal(err)
		}
	}
	again, err := OpenLog(ctx, nc, "prod_old")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := again.Info(ctx); info.NamespaceOf != base || info.Namespace != "old" {
		t.Fatalf("Info after MarkNamespace: %+v", info)
	}
	if a, err := again.Attested(ctx); err != nil || len(a.Snapshots) != 0 {
		t.Fatalf("attestations after the mark: %+v, %v", a, err)
	}
}

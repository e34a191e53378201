package fileblob

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// TestBatchPresenceFromListing: once a batch has listed a directory, a key
// the listing lacks is absent without a stat — a file put there behind the
// batch's back stays unseen, which only costs putting it again — and a key
// the batch put itself, or one the listing holds, is stat'ed for real.
func TestBatchPresenceFromListing(t *testing.T) {
	ctx := t.Context()
	s, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	bk := ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
	if err := bk.PutObject(ctx, "d/old", strings.NewReader("old"), 3); err != nil {
		t.Fatal(err)
	}
	b := bk.NewBatch()
	for range listAfter {
		if _, err := b.StatObject(ctx, "d/new"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("StatObject(d/new) = %v, want ErrNotFound", err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "d", "behind"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StatObject(ctx, "d/behind"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("StatObject(d/behind) = %v, want ErrNotFound from the listing (no stat)", err)
	}
	if err := b.PutObject(ctx, "d/new", strings.NewReader("new"), 3); err != nil {
		t.Fatal(err)
	}
	if info, err := b.StatObject(ctx, "d/new"); err != nil || info.Size != 3 {
		t.Errorf("StatObject(d/new) after the batch's put = %+v, %v, want size 3", info, err)
	}
	if err := os.Remove(filepath.Join(s.Dir(), "d", "old")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StatObject(ctx, "d/old"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("StatObject(d/old) after its removal = %v, want ErrNotFound (a listed key is stat'ed)", err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.PutObject(ctx, "d/late", strings.NewReader("x"), 1); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("PutObject after Flush = %v, want ErrInvalid", err)
	}
}

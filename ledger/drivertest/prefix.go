package drivertest

import (
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// TestPrefixIsolation checks a store that takes a key prefix (S3, GCS): stores
// on one bucket under the prefixes "", "a", "/ab/" and "a/b" each put the key
// "k"; each lists only the keys under its own prefix, relative to it (the
// slashes around a prefix do not matter), and the store without a prefix lists
// them all. newStore returns the driver of a store on one shared, initially
// empty bucket under prefix.
func TestPrefixIsolation(t *testing.T, newStore func(t *testing.T, prefix string) driver.Bucket) {
	t.Helper()
	ctx := testContext(t)
	stores := map[string]*ledger.Bucket{}
	for _, p := range []string{"", "a", "/ab/", "a/b"} {
		s := open(t, newStore(t, p), once)
		stores[p] = s
		if err := s.PutObject(ctx, "k", strings.NewReader(p), int64(len(p))); err != nil {
			t.Fatal(err)
		}
	}
	for p, want := range map[string][]string{
		"":     {"a/b/k", "a/k", "ab/k", "k"},
		"a":    {"b/k", "k"},
		"/ab/": {"k"},
		"a/b":  {"k"},
	} {
		if got := keys(list(t, ctx, stores[p], "")); !slices.Equal(got, want) {
			t.Errorf("prefix %q: ListObjects = %q, want %q", p, got, want)
		}
	}
}

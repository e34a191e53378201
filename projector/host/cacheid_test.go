package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// A cache is found from any directory inside it; its host id is made once
// (hostname and a random suffix), kept, and the first one stored wins.
func TestCacheAndHostID(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, ok := FindCache(deep); ok {
		t.Fatalf("FindCache outside a cache = %s", dir)
	}
	if err := os.Mkdir(filepath.Join(root, ledger.StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, ok := FindCache(deep); !ok || dir != root {
		t.Fatalf("FindCache(%s) = %s %v, want %s", deep, dir, ok, root)
	}

	hostname, _ := os.Hostname()
	id, stored, err := CacheHostID(root)
	if err != nil || stored || !strings.HasPrefix(id, hostname+"-") || len(id) != len(hostname)+7 {
		t.Fatalf("CacheHostID of a new cache = %q %v %v, want %s-XXXXXX, not stored", id, stored, err, hostname)
	}
	other, _, _ := CacheHostID(root)
	if other == id {
		t.Fatalf("two new ids alike: %s", id)
	}
	if got, err := StoreHostID(root, id); err != nil || got != id {
		t.Fatalf("StoreHostID = %q %v, want %q", got, err, id)
	}
	if got, err := StoreHostID(root, other); err != nil || got != id {
		t.Fatalf("a second StoreHostID = %q %v, want the first %q", got, err, id)
	}
	if got, stored, err := CacheHostID(root); err != nil || !stored || got != id {
		t.Fatalf("CacheHostID of a cache with an id = %q %v %v, want %q stored", got, stored, err, id)
	}
}

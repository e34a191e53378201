package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// longPartition is a path whose partition no event can carry: its escaped
// token is longer than ledger.MaxTokenLen, though every segment is short.
var longPartition = "data/" + strings.Repeat("~", 250) + "/" + strings.Repeat("~", 250) + "/" + strings.Repeat("~", 250) + "/id/name/1/raw"

// The plan's path admission (admit) takes the paths every host can hold, of
// a partition an event can carry, and refuses the others; a commit leaves
// the refused ones out, not synced, and publishes the rest.
func TestPathAdmission(t *testing.T) {
	t.Parallel()
	if ledger.CheckPartitionToken(ledger.PartitionKey(longPartition)) == nil {
		t.Fatalf("the test's long partition %q is one an event carries", ledger.PartitionKey(longPartition))
	}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"data/command/shell/vpc/result/1/raw", true},
		{"definitions-evaluated/command/shell/vpc.yaml", true},
		{".syncledgerignore", true},
		{".syncledger/state.db", false},
		{".SyncLedger/x", false},
		{".SYNCLEDGERIGNORE", false},
		{".syncledgerignore/x", false},
		{"data/" + strings.Repeat("n", ledger.MaxNameLen+1), false},
		{"data/a\x01b", false},
		{"data/a\\b", false},
		{"data/./x", false},
		{longPartition, false},
	} {
		if err := admit(tc.path); (err == nil) != tc.ok {
			t.Errorf("admit(%q) = %v, want admitted %v", tc.path, err, tc.ok)
		}
	}

	e := newEnv(t)
	h := e.host("a")
	writeFile(t, h, "data/t/m/d/1/raw", "admitted")
	writeFile(t, h, ".SYNCLEDGERIGNORE", "refused: the ignore file's name on a case-insensitive file system")
	p := filepath.Join(h.Dir().Root(), filepath.FromSlash(longPartition))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("refused: its partition is too long"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustCommit(t, h, "")
	if res.Written != 1 || len(res.Paths) != 1 || res.Paths[0] != "data/t/m/d/1/raw" {
		t.Fatalf("commit: %+v, want only the admitted file", res)
	}
	if st := mustStatus(t, h); len(st.Dirty) != 0 {
		t.Fatalf("status after the commit: dirty %q; the refused paths are not synced, not dirty", st.Dirty)
	}
}

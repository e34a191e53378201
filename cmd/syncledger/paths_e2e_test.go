package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
)

// hostileEvent is a well-formed event (commit id n) of one file at path, a
// write of content, extending its partition's chain as a cache at st sees it: what a
// host credential can publish with the raw NATS client, past the writer's
// checks.
func hostileEvent(t *testing.T, n int, uuid string, st cliStatus, path, content string) string {
	t.Helper()
	part := ledger.PartitionKey(path)
	mk := st.Partitions[part]
	entry, _ := json.Marshal(map[string]any{"path": path, "sha256": ledger.DigestOf([]byte(content)).String(), "size": len(content), "mode": 0o644})
	return fmt.Sprintf(`{"v":1,"ledger":%q,"commit":"019a1b2c-3d4e-7f60-8a1b-2c3d4e5f6a%02x","host":"attacker","at":"2026-11-29T10:00:00Z",`+
		`"partition":%q,"modelSeq":%d,"prev":%d,"parts":1,"part":1,"entries":[%s]}`,
		uuid, n, part, mk.ModelSeq+1, mk.Seq, entry)
}

// TestReservedPathsCLI is issue 38 point 10, from the attacker's side: a
// commit naming .syncledgerignore/x, published raw with its content in the
// blob store, passed path validation; every host applied it, and from then on
// every host's commit failed ("read .syncledgerignore: is a directory") with
// no way out, and `quarantine N --force` did not help (the hosts had applied
// it). Now every reader refuses the event before anything is written, naming
// `syncledger quarantine N`; followed as printed, every host's sync and
// commit work again and every host, a fresh one and a rebuilt one agree. The
// same holds for the other paths no host may hold: the state directory
// spelt in other case (on macOS and Windows, the state directory itself), a
// segment longer than NAME_MAX and a path longer than ledger.MaxPathLen.
func TestReservedPathsCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "reserved")
	blobDir := t.TempDir()
	c.ok("init", "--blobs", "file://"+blobDir)
	objs, err := fileblob.New(fileblob.Config{Dir: blobDir})
	if err != nil {
		t.Fatal(err)
	}
	blobs := ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	a, b := t.TempDir(), t.TempDir()
	ha := []string{"--cache", a, "--host", "a"}
	hb := []string{"--cache", b, "--host", "b"}
	put(t, a, "notes/a", "a")
	c.ok(append(ha, "commit")...)
	c.ok(append(hb, "sync")...)
	var info struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal([]byte(c.ok(append(hb, "status", "--json")...)), &info); err != nil || info.UUID == "" {
		t.Fatalf("status --json: %v", err)
	}

	for i, tc := range []struct{ name, path, says string }{
		{"ignore file as a directory", ".syncledgerignore/x", ".syncledgerignore as a directory"},
		{"state directory in other case", ".SyncLedger/state.db", "inside .syncledger"},
		{"a name longer than NAME_MAX", "notes/" + strings.Repeat("n", ledger.MaxNameLen+1), "a segment of 256 bytes, limit 255"},
		{"a path longer than MaxPathLen", "notes/" + strings.Repeat(strings.Repeat("p", 99)+"/", 41) + "x", "bytes, limit 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := "hostile " + tc.name
			if err := blobs.Put(t.Context(), ledger.DigestOf([]byte(content)), bytes.NewReader([]byte(content)), int64(len(content))); err != nil {
				t.Fatal(err)
			}
			seq := c.publishRaw("reserved", ledger.PartitionKey(tc.path), hostileEvent(t, i, info.UUID, c.status(b), tc.path, content))

			r := c.run(append(hb, "sync")...)
			want := fmt.Sprintf("way out: syncledger quarantine %d ", seq)
			if r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, tc.says) {
				t.Fatalf("sync after a raw event naming %.40q: exit %d, want %q and %q:\n%s", tc.path, r.code, want, tc.says, r.stderr)
			}
			if _, err := os.Lstat(filepath.Join(b, ".syncledgerignore")); !os.IsNotExist(err) {
				t.Fatalf("the refused event left .syncledgerignore in b: %v", err)
			}
			// Both hosts' sync and commit, by the printed ways out.
			put(t, a, fmt.Sprintf("notes/a%d", i), "a's edit")
			trail := c.followWayOuts(ha, 6, "commit")
			trail = append(trail, c.followWayOuts(hb, 6, "sync")...)
			put(t, b, fmt.Sprintf("notes/b%d", i), "b's edit")
			trail = append(trail, c.followWayOuts(hb, 6, "commit")...)
			t.Logf("converged: %s", strings.Join(trail, " → "))
			checkConverged(c, []string{a, b})
			got := tree(t, b)
			if got[fmt.Sprintf("notes/a%d", i)] != "a's edit" {
				t.Fatalf("b holds %v, want a's edit", got)
			}
			for p := range got {
				if strings.HasPrefix(strings.ToLower(p), ".syncledger") || len(p) > 200 {
					t.Fatalf("b holds %.60q", p)
				}
			}
		})
	}
}

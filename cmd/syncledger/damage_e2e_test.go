package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// A damaged state.db (issue 26 point 7): status, sync, commit and verify
// panicked in bbolt ("assertion failed: Page expected to be: 2 …", exit 2, no
// JSON error, no way out), and damage that sends bbolt past its memory map
// crashed them with SIGSEGV. Now each exits 4 with a damaged-state error whose
// way out is 'syncledger rebuild'; the rebuild sets the damaged file aside,
// starts the state over from the ledger and the cache, keeps every file that
// differs from the ledger under .syncledger/conflicts/ — an uncommitted edit,
// and, when the rebuild starts from a snapshot, the older version of a file
// another host changed since (a replay from the start recognises it as the
// ledger's and moves it on) — and the host converges with the others.
func TestDamagedStateCLI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		damage   func(t *testing.T, path string)
		snapshot bool
		kept     map[string]string
	}{
		{"bad page headers", damagePageHeaders, false, map[string]string{"audit/one": "a's uncommitted edit"}},
		{"page ids past the file", damageBranchPgids, true,
			map[string]string{"audit/one": "a's uncommitted edit", "data/t/m7/x/metadata.yaml": "v1 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, "damaged")
			c.ok("init", "--blobs", "file://"+t.TempDir())
			a, b := t.TempDir(), t.TempDir()
			// Enough files for the index to span leaf pages under a branch page.
			for i := range 300 {
				put(t, a, fmt.Sprintf("data/t/m%d/x/metadata.yaml", i), fmt.Sprint("v1 ", i))
			}
			put(t, a, "audit/one", "1")
			c.ok("--cache", a, "--host", "a", "commit")
			c.ok("--cache", b, "--host", "b", "sync")
			put(t, b, "data/t/m7/x/metadata.yaml", "v2 from b")
			c.ok("--cache", b, "--host", "b", "commit")
			if tc.snapshot {
				c.ok("snapshot")
			}
			put(t, a, "audit/one", "a's uncommitted edit")

			tc.damage(t, filepath.Join(a, ledger.StateDir, "state.db"))
			for _, cmd := range [][]string{{"status"}, {"sync"}, {"commit"}, {"verify"}} {
				args := append([]string{"--cache", a, "--host", "a"}, append(cmd, "--json")...)
				r := c.run(args...)
				if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "SIGSEGV") {
					t.Fatalf("%s crashed on the damaged state:\n%s", cmd[0], r.stderr)
				}
				e := checkErrorJSON(t, args, r)
				if r.code != exitRebuild || e.Kind != "damaged-state" || len(e.Commands) != 1 || e.Commands[0] != "syncledger rebuild" {
					t.Fatalf("%s: exit %d, error %+v; want exit 4, kind damaged-state, way out syncledger rebuild", cmd[0], r.code, e)
				}
				if !strings.Contains(r.stderr, "way out: syncledger rebuild") {
					t.Fatalf("%s printed no way out:\n%s", cmd[0], r.stderr)
				}
			}

			// The way out, as printed.
			out := c.ok("--cache", a, "--host", "a", "rebuild", "--quiet")
			if !strings.Contains(out, "state.db.damaged-") || !strings.Contains(out, fmt.Sprintf("kept %d files", len(tc.kept))) {
				t.Fatalf("rebuild did not say what it set aside:\n%s", out)
			}
			kept, err := filepath.Glob(filepath.Join(a, ledger.StateDir, "conflicts", "*"))
			if err != nil || len(kept) != 1 {
				t.Fatalf("conflicts dirs %v, %v", kept, err)
			}
			if got := tree(t, kept[0]); len(got) != len(tc.kept) {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			for rel, want := range tc.kept {
				if got, err := os.ReadFile(filepath.Join(kept[0], filepath.FromSlash(rel))); err != nil || string(got) != want {
					t.Errorf("kept %s = %q, %v; want %q", rel, got, err, want)
				}
			}
			checkConverged(c, []string{a, b})
			// The kept edit, copied back and committed, reaches the other host.
			edit, _ := os.ReadFile(filepath.Join(kept[0], "audit", "one"))
			put(t, a, "audit/one", string(edit))
			c.ok("--cache", a, "--host", "a", "commit")
			checkConverged(c, []string{a, b})
			if got := tree(t, b)["audit/one"]; got != "a's uncommitted edit" {
				t.Fatalf("b's audit/one = %q", got)
			}
		})
	}
}

// pages returns the page size and the pages of a bbolt file.
func pages(t *testing.T, path string) ([]byte, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int(binary.LittleEndian.Uint32(b[16+8:])) // meta page: header, magic, version, then the page size
	if size < 512 || len(b)%size != 0 {
		t.Fatalf("page size %d of a %d-byte file", size, len(b))
	}
	return b, size
}

// damagePageHeaders flips the header of every page but the two meta pages:
// what made bbolt assert "Page expected to be: 2".
func damagePageHeaders(t *testing.T, path string) {
	b, size := pages(t, path)
	for off := 2 * size; off < len(b); off += size {
		for i := range 8 {
			b[off+i] ^= 0xff
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// damageBranchPgids points every child of every branch page far past the end
// of the file: bbolt reads there through its memory map (SIGSEGV before).
func damageBranchPgids(t *testing.T, path string) {
	b, size := pages(t, path)
	n := 0
	for off := 2 * size; off < len(b); off += size {
		const branch = 0x01
		if binary.LittleEndian.Uint16(b[off+8:]) != branch {
			continue
		}
		count := int(binary.LittleEndian.Uint16(b[off+10:]))
		for i := range count {
			el := off + 16 + i*16                                    // branchPageElement: pos, ksize uint32, pgid uint64
			binary.LittleEndian.PutUint64(b[el+8:], 1<<30+uint64(i)) // 4 TiB past the map: inside bbolt's bounds checks
			n++
		}
	}
	if n == 0 {
		t.Fatal("no branch page to damage")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

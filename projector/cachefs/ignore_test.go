package cachefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncledger/syncledger/projector/ignore"
)

// Ignore reads the rules again whenever their file changed — created,
// rewritten (even to the same size), removed — and keeps them only when the
// file is older than its mtime's granularity could hide a write in.
func TestIgnoreFollowsItsFile(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Root(), ignore.FileName)
	ignores := func(rel string) bool {
		t.Helper()
		m, err := d.Ignore()
		if err != nil {
			t.Fatal(err)
		}
		return m.Match(rel, false)
	}
	write := func(content string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if ignores("a.x") {
		t.Fatal("a.x ignored with no rules")
	}
	old := time.Now().Add(-time.Hour)
	write("*.x\n", old)
	if !ignores("a.x") || ignores("a.y") {
		t.Fatal("the new file's rules are not read")
	}
	write("*.y\n", old.Add(time.Second)) // same size, later mtime
	if ignores("a.x") || !ignores("a.y") {
		t.Fatal("a rewrite of the same size is not read")
	}
	// Within the racy window a rewrite may keep size and mtime: those
	// rules are read again each time.
	now := time.Now()
	write("*.x\n", now)
	if !ignores("a.x") {
		t.Fatal("a recent file's rules are not read")
	}
	write("*.z\n", now)
	if ignores("a.x") || !ignores("a.z") {
		t.Fatal("a recent file's rewrite with its size and mtime is not read")
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if ignores("a.z") {
		t.Fatal("the removed file's rules still hold")
	}
}

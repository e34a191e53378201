package testmain

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// The temporary directory of a test is under the one Setup chose, and a TMPDIR
// set beforehand wins.
func TestSetup(t *testing.T) {
	dir := t.TempDir()
	if want := os.TempDir(); len(dir) < len(want) || dir[:len(want)] != want {
		t.Fatalf("t.TempDir() = %s, not under os.TempDir() %s", dir, want)
	}
	t.Setenv("TMPDIR", dir)
	if got := Setup(); got != dir {
		t.Fatalf("Setup with TMPDIR=%s chose %s", dir, got)
	}
	t.Logf("/dev/shm usable: %v", usable("/dev/shm"))
}

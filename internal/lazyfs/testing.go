//go:build linux

package lazyfs

import (
	"os"
	"testing"
)

// PowerLossEnv turns the power-loss tests on; they need root and /dev/fuse.
const PowerLossEnv = "SYNCLEDGER_TEST_POWERLOSS"

// MountT is the opt-in gate and setup of a power-loss test: it skips t unless
// PowerLossEnv is set, and then mounts a new FS on a temp directory. With
// PowerLossEnv set, a mount that fails fails t: a power-loss test asked for
// never skips. The caller unmounts (a test that cuts the power mounts again).
func MountT(t testing.TB) (*FS, *Mount) {
	t.Helper()
	if os.Getenv(PowerLossEnv) == "" {
		t.Skip("set " + PowerLossEnv + "=1 to run the power-loss tests (root, /dev/fuse)")
	}
	f := New()
	m, err := f.Mount(t.TempDir())
	if err != nil {
		t.Fatalf("%s is set: %v", PowerLossEnv, err)
	}
	return f, m
}

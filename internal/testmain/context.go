package testmain

import (
	"context"
	"testing"
	"time"
)

// Context returns a context done d from now: a test that hangs fails with its
// own deadline, not the binary's. Unlike t.Context it is not done before the
// test's cleanups: those registered after the call still find it live (it is
// cancelled by a cleanup of its own).
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

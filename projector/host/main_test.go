package host

import (
	"os"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

func TestMain(m *testing.M) {
	testmain.Setup()
	// Several tests wait on timeouts and reconnects (lost acks, blob faults,
	// server restarts) rather than the CPU: eight at once keep both cores busy.
	testmain.Parallel(8)
	os.Exit(m.Run())
}

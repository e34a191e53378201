package dirty

import (
	"os"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

func TestMain(m *testing.M) {
	testmain.Setup()
	// The tests mostly wait on round trips (socket requests, the barrier's
	// inotify event), not on the CPU: eight at once keep both cores busy.
	testmain.Parallel(8)
	os.Exit(m.Run())
}

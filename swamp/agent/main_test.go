package agent

import (
	"os"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

func TestMain(m *testing.M) {
	testmain.Setup()
	// Most tests wait on lock TTLs, a child process, servers and polls rather
	// than the CPU: eight at once keep both cores busy.
	testmain.Parallel(8)
	os.Exit(m.Run())
}

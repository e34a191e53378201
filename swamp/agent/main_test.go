package agent

import (
	"os"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

func TestMain(m *testing.M) {
	testmain.Setup()
	// The tests run in process on memledger and one test clock each (no
	// server, no lock TTL waited out); the close tests wait on a child
	// process and the agent's background scans on the disk: eight at once
	// keep both cores busy.
	testmain.Parallel(8)
	os.Exit(m.Run())
}

package consumers_test

import (
	"os"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

func TestMain(m *testing.M) {
	testmain.Setup()
	// Each test starts its own nats-server and spends most of its time waiting
	// on it (most of all on its shutdown), not on the CPU: eight at once keep
	// both cores busy.
	testmain.Parallel(8)
	os.Exit(m.Run())
}

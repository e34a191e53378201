package s3test

import (
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }

package jetstream

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/ledgertest"
	"github.com/syncledger/syncledger/ledger"
)

// TestKVConformance runs the ledger.KV suite on the adapter, one bucket per
// subtest on one server (memledger runs the same suite).
func TestKVConformance(t *testing.T) {
	t.Parallel()
	_, nc := newLedger(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ledgertest.TestKV(t, func(t *testing.T) ledger.KV {
		n++
		kv, err := OpenKV(testCtx(t), js, "test", "conformance_"+string(rune('a'+n)), "conformance")
		if err != nil {
			t.Fatal(err)
		}
		return NewKV(kv)
	})
}

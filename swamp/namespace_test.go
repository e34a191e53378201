package swamp

import (
	"errors"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

func TestNamespaceLedgerAndBlobs(t *testing.T) {
	if got, err := NamespaceLedger("infra", "ci-2"); err != nil || got != "infra_ci-2" {
		t.Fatalf("NamespaceLedger: %q, %v", got, err)
	}
	for _, ns := range []string{"", "Ci", "a_b", "-x", "x-", strings.Repeat("a", 65)} {
		if _, err := NamespaceLedger("infra", ns); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("namespace %q: %v, want ErrInvalid", ns, err)
		}
	}
	if _, err := NamespaceLedger(strings.Repeat("l", 60), "long"); err == nil || !strings.Contains(err.Error(), "shorter") {
		t.Errorf("a too long ledger name: %v", err)
	}
	for raw, want := range map[string]string{
		"file:///var/blobs":  "file:///var/blobs/ns-ci",
		"file:///var/blobs/": "file:///var/blobs/ns-ci",
		"s3://bkt/swamp?endpoint=http%3A%2F%2F127.0.0.1%3A7070&region=us-east-1": "s3://bkt/swamp/ns-ci?endpoint=http%3A%2F%2F127.0.0.1%3A7070&region=us-east-1",
		"s3://bkt":       "s3://bkt/ns-ci",
		"gs://bkt/p":     "gs://bkt/p/ns-ci",
		"nats://BLOBS_x": "nats://BLOBS_x_ns_ci",
	} {
		if got, err := NamespaceBlobs(raw, "ci"); err != nil || got != want {
			t.Errorf("NamespaceBlobs(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	if _, err := NamespaceBlobs("ftp://x/y", "ci"); err == nil {
		t.Error("an unknown scheme was accepted")
	}
}

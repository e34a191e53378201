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

// TestCheckNamespaceLedger is issue 38 point 11's decision: setup adopted any
// ledger named BASE_NS. Only a ledger marked as namespace ns of base is
// taken; an unmarked one only when base's registry already lists ns for the
// repo (a namespace's ledger made before the mark: marked then); another
// mark, or none and no registration, is refused saying what to do.
func TestCheckNamespaceLedger(t *testing.T) {
	base := ledger.Info{Name: "prod", UUID: "6f1c2a4e-8a3b-4c5d-9e7f-0a1b2c3d4e5f"}
	const other = "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b"
	for _, tc := range []struct {
		name       string
		l          ledger.Info
		registered bool
		legacy     bool
		says       string // "" accepted
	}{
		{"marked", ledger.Info{Name: "prod_eu", NamespaceOf: base.UUID, Namespace: "eu"}, false, false, ""},
		{"marked and registered", ledger.Info{Name: "prod_eu", NamespaceOf: base.UUID, Namespace: "eu"}, true, false, ""},
		{"made before the mark", ledger.Info{Name: "prod_eu"}, true, true, ""},
		{"a plain ledger", ledger.Info{Name: "prod_eu"}, false, false, "pick another namespace"},
		{"another base's", ledger.Info{Name: "prod_eu", NamespaceOf: other, Namespace: "eu"}, true, false, other},
		{"another namespace's", ledger.Info{Name: "prod_eu", NamespaceOf: base.UUID, Namespace: "e"}, true, false, `namespace "e"`},
	} {
		legacy, err := CheckNamespaceLedger(base, "eu", tc.l, tc.registered)
		switch {
		case tc.says == "" && (err != nil || legacy != tc.legacy):
			t.Errorf("%s: legacy %v, %v; want %v, nil", tc.name, legacy, err, tc.legacy)
		case tc.says != "" && (!errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v; want ErrInvalid saying %q", tc.name, err, tc.says)
		}
	}
}

package maintain

import (
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

func TestPolicyDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		p         Policy
		last      ledger.Seq
		ago       time.Duration
		head      ledger.Seq
		want      bool
		situation string
	}{
		{Policy{Every: 100}, 0, 0, 99, false, "fewer seqs than Every"},
		{Policy{Every: 100}, 0, 0, 100, true, "Every seqs"},
		{Policy{Every: 100}, 50, 0, 149, false, "since the last one"},
		{Policy{Interval: time.Hour}, 10, 59 * time.Minute, 11, false, "before the interval"},
		{Policy{Interval: time.Hour}, 10, time.Hour, 11, true, "interval passed"},
		{Policy{Interval: time.Hour}, 10, 5 * time.Hour, 10, false, "nothing new"},
		{Policy{Every: 5, Interval: time.Hour}, 10, time.Minute, 15, true, "either"},
		{Policy{}, 0, 100 * time.Hour, 1000, false, "off"},
	} {
		if got := tc.p.Due(tc.last, now.Add(-tc.ago), tc.head, now); got != tc.want {
			t.Errorf("%s: Due = %v, want %v", tc.situation, got, tc.want)
		}
	}
}

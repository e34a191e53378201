package maintain

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/snapshot"
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

// TestRunIgnoresPlantedSnapshot: a snapshot anyone who writes blobs stored far
// above the head (never attested) does not make the policy loop think every
// snapshot is taken already.
func TestRunIgnoresPlantedSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, _ := newLedger(t)
	var prev ledger.Seq
	var n uint64
	for _, c := range []string{"v1", "v2", "v3"} {
		commit(t, cfg, "audit/x", c, &prev, &n)
	}
	info, _ := cfg.Log.Info(ctx)
	planted := []byte("whatever")
	if err := cfg.Objects.PutObject(ctx, snapshot.Key(info.UUID, 1<<40), bytes.NewReader(planted), int64(len(planted))); err != nil {
		t.Fatal(err)
	}
	if err := runOnce(ctx, RunConfig{Config: cfg, Policy: Policy{Every: 1}, Now: time.Now}, info.UUID); err != nil {
		t.Fatal(err)
	}
	infos, err := snapshot.ListAttested(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || !infos[1].Attested || infos[1].Seq != 3 {
		t.Errorf("after a policy run beside a planted snapshot: %+v, want the attested one at seq 3", infos)
	}
}

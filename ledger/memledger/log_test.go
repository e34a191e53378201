package memledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/drivertest"
	"github.com/syncledger/syncledger/ledger/memledger"
)

func TestCommitLogConformance(t *testing.T) {
	n := 0
	drivertest.TestCommitLog(t, func(t *testing.T) drivertest.LogFixture {
		n++
		l, err := memledger.New(ledger.Info{Name: "test", UUID: fmt.Sprintf("11111111-1111-4111-8111-%012d", n), Blobs: "mem://"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return drivertest.LogFixture{Driver: l.Driver(), Publish: func(subject string, data []byte) (ledger.Seq, error) {
			return l.Publish(subject, data), nil
		}}
	})
}

// TestRewind: a log rewound to a seq is the log a server restored from a
// backup of that time holds: the messages after it gone, each partition's
// chain extended from its head then, a commit id stored after it storable
// again (no deduplication), its later notices gone.
func TestRewind(t *testing.T) {
	ctx := context.Background()
	l, err := memledger.New(ledger.Info{Name: "test", Blobs: "mem://"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendTo := func(p string, commit string) ledger.Seq {
		t.Helper()
		mk := ledger.Seq(0)
		ms := uint64(1)
		if r, err := l.PartitionHead(ctx, p); err == nil {
			mk, ms = r.Seq, r.Event.ModelSeq+1
		}
		ev := ledger.Event{V: ledger.FormatVersion, Ledger: l.UUID(), Commit: commit, Host: "h", At: time.Unix(0, 0).UTC(),
			Partition: p, ModelSeq: ms, Prev: mk, Parts: 1, Part: 1,
			Entries: []ledger.Entry{{Path: p + "/f", SHA256: ledger.DigestOf([]byte(commit)), Size: 1, Mode: 0o644}}}
		seqs, err := l.Append(ctx, []ledger.Event{ev})
		if err != nil {
			t.Fatal(err)
		}
		return seqs[0]
	}
	ids := []string{"01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-000000000002", "01900000-0000-7000-8000-000000000003"}
	appendTo("a", ids[0])
	appendTo("a", ids[1])
	if _, err := l.Quarantine(ctx, ledger.Quarantine{V: ledger.FormatVersion, Ledger: l.UUID(), Seq: 2, Reason: "test", By: "admin", At: time.Unix(0, 0).UTC()}, true); err != nil {
		t.Fatal(err)
	}
	l.Rewind(1)
	if last, _ := l.LastSeq(ctx); last != 1 {
		t.Fatalf("last seq after Rewind(1) = %d, want 1", last)
	}
	if qs, _ := l.Quarantines(ctx); len(qs) != 0 {
		t.Fatalf("quarantines after the rewind = %v, want none", qs)
	}
	if s := appendTo("a", ids[1]); s != 2 { // the same commit id again: not a duplicate now
		t.Fatalf("append after the rewind at seq %d, want 2", s)
	}
	if s := appendTo("a", ids[2]); s != 3 {
		t.Fatalf("append at seq %d, want 3", s)
	}
	if c, err := l.CommitAt(ctx, 3); err != nil || c != ids[2] {
		t.Fatalf("CommitAt(3) = %q, %v", c, err)
	}
}

package consumers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
)

const uuidA = "0190a0b0-0000-7000-8000-00000000000a"

// rec returns a record of commit id: part of parts at seq.
func rec(id string, seq ledger.Seq, part, parts int) ledger.Record {
	p := string(rune('a' + part - 1))
	path := p + "/f"
	return ledger.Record{Seq: seq, Event: ledger.Event{
		V: 1, Ledger: uuidA, Commit: id, Host: "h", At: time.Unix(0, 0), Partition: p, ModelSeq: 1,
		Parts: parts, Part: part,
		Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: 5, Mode: 0o644}},
	}}
}

func TestNewCommitRejectsMixedRecords(t *testing.T) {
	t.Parallel()
	for _, recs := range [][]ledger.Record{
		nil,
		{rec("c1", 1, 1, 2), rec("c2", 2, 2, 2)},
		{rec("c1", 2, 2, 2), rec("c1", 1, 1, 2)},
		{rec("c1", 1, 1, 2), rec("c1", 3, 2, 2)},
	} {
		if _, err := consumers.NewCommit(recs); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("NewCommit(%d records) = %v, want ErrInvalid", len(recs), err)
		}
	}
}

func TestSummarizeResolvesManifests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	blobs := ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	es := []ledger.Entry{
		{Path: "b/x", SHA256: ledger.DigestOf([]byte("x")), Size: 7, Mode: 0o600},
		{Path: "b/gone", Deleted: true},
	}
	m, err := ledger.EncodeManifest(es)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ledger.PutBytes(ctx, blobs, m)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := rec("c1", 10, 1, 2), rec("c1", 11, 2, 2)
	r2.Event.Entries, r2.Event.Manifest = nil, d
	c, err := consumers.NewCommit([]ledger.Record{r1, r2})
	if err != nil {
		t.Fatal(err)
	}

	s, err := consumers.Summarize(ctx, "l", c, blobs)
	if err != nil {
		t.Fatal(err)
	}
	want := []consumers.SummaryEntry{
		{Path: "a/f", SHA256: ledger.DigestOf([]byte("a/f")).String(), Size: 5, Mode: 0o644},
		{Path: "b/x", SHA256: ledger.DigestOf([]byte("x")).String(), Size: 7, Mode: 0o600},
		{Path: "b/gone", Deleted: true},
	}
	if diff := cmp.Diff(want, s.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if s.Seq != 11 || s.Files != 2 || s.Deleted != 1 || s.Bytes != 12 || len(s.Unresolved) != 0 {
		t.Errorf("summary = %+v", s)
	}

	s, err = consumers.Summarize(ctx, "l", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unresolved) != 1 || s.Unresolved[0] != d.String() || s.Files != 1 {
		t.Errorf("without blobs: unresolved %v, files %d", s.Unresolved, s.Files)
	}
}

package ledger_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// manifestChecking is a log whose Append fails the test unless every
// manifest the events name is already stored: Publish's content-first order.
type manifestChecking struct {
	ledger.CommitLog
	t       *testing.T
	blobs   *ledger.Bucket
	appends int
}

func (l *manifestChecking) Append(ctx context.Context, events []ledger.Event, fences ...ledger.Fence) ([]ledger.Seq, error) {
	l.appends++
	for _, ev := range events {
		if ev.Manifest.IsZero() {
			continue
		}
		if _, err := ledger.ReadBlob(ctx, l.blobs, ev.Manifest); err != nil {
			l.t.Errorf("append of %q before its manifest is stored: %v", ev.Partition, err)
		}
	}
	return l.CommitLog.Append(ctx, events, fences...)
}

// failingPuts is a blob driver whose puts fail, its batches' too.
type failingPuts struct{ driver.Bucket }

var errPut = errors.New("put refused")

func (failingPuts) Put(context.Context, string, io.Reader, int64) error { return errPut }

func (f failingPuts) NewBatch() driver.Batch { return driver.DurableEach(f) }

// publishEvents returns one commit's events on log: a partition whose
// entries do not fit inline (a manifest) and a small one.
func publishEvents(t *testing.T, log *memledger.Log) []ledger.Event {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	big := ledger.Event{V: ledger.FormatVersion, Ledger: log.UUID(), Commit: id, Host: "a", At: at,
		Partition: "data--aws--big", ModelSeq: 1, Parts: 2, Part: 1}
	for i := range 5000 {
		big.Entries = append(big.Entries, ledger.Entry{Path: fmt.Sprintf("data/aws/big/state/%d/raw", i), SHA256: ledger.DigestOf([]byte{byte(i)}), Size: 1, Mode: 0o644})
	}
	small := ledger.Event{V: ledger.FormatVersion, Ledger: log.UUID(), Commit: id, Host: "a", At: at,
		Partition: "data--aws--small", ModelSeq: 1, Parts: 2, Part: 2,
		Entries: []ledger.Entry{{Path: "data/aws/small/state/1/raw", SHA256: ledger.DigestOf([]byte("x")), Size: 1, Mode: 0o644}}}
	return []ledger.Event{big, small}
}

// newPublishLedger returns an empty log, a blob store over a file store, and
// that file store.
func newPublishLedger(t *testing.T) (*memledger.Log, *ledger.Bucket, driver.Bucket) {
	t.Helper()
	log, err := memledger.New(ledger.Info{Name: "pub"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return log, ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1}), objs
}

// Publish stores a manifest before the append that names it, and the events
// read back with their entries.
func TestPublishManifestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, blobs, _ := newPublishLedger(t)
	events := publishEvents(t, log)
	cl := &manifestChecking{CommitLog: log, t: t, blobs: blobs}
	seqs, err := ledger.Publish(ctx, cl, blobs, events)
	if err != nil {
		t.Fatal(err)
	}
	if cl.appends != 1 || !slices.Equal(seqs, []ledger.Seq{1, 2}) {
		t.Fatalf("Publish: %d appends, seqs %v; want 1 append at seqs [1 2]", cl.appends, seqs)
	}
	var got []ledger.Record
	if err := log.Read(ctx, 1, 0, func(r ledger.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Event.Manifest.IsZero() || len(got[0].Event.Entries) != 0 || !got[1].Event.Manifest.IsZero() {
		t.Fatalf("stored events: %+v; want the first by manifest, the second inline", got)
	}
	b, err := ledger.ReadBlob(ctx, blobs, got[0].Event.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	es, err := ledger.DecodeManifest(b, events[0].Partition)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(events[0].Entries, es); diff != "" {
		t.Fatalf("manifest entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(events[1].Entries, got[1].Event.Entries); diff != "" {
		t.Fatalf("inline entries (-want +got):\n%s", diff)
	}
}

// A manifest that cannot be stored publishes nothing.
func TestPublishManifestFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, _, objs := newPublishLedger(t)
	blobs := ledger.NewBucket(failingPuts{objs}, ledger.RetryPolicy{Attempts: 1})
	cl := &manifestChecking{CommitLog: log, t: t, blobs: blobs}
	if _, err := ledger.Publish(ctx, cl, blobs, publishEvents(t, log)); !errors.Is(err, errPut) {
		t.Fatalf("Publish with a failing blob store = %v, want %v", err, errPut)
	}
	b, err := log.Bounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl.appends != 0 || b.Last != 0 {
		t.Fatalf("after a failed manifest put: %d appends, last seq %d; want none", cl.appends, b.Last)
	}
}

// Append's answers come back as they are: a chain conflict as a
// *ConflictError, a lost answer as ErrOutcomeUnknown, after which publishing
// the same events again stores nothing twice.
func TestPublishAppendOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log, blobs, _ := newPublishLedger(t)
	events := publishEvents(t, log)

	lost := true
	log.LoseAck = func() bool { l := lost; lost = false; return l }
	if _, err := ledger.Publish(ctx, log, blobs, events); !errors.Is(err, ledger.ErrOutcomeUnknown) {
		t.Fatalf("Publish with the answer lost = %v, want ErrOutcomeUnknown", err)
	}
	seqs, err := ledger.Publish(ctx, log, blobs, events)
	if err != nil || !slices.Equal(seqs, []ledger.Seq{1, 2}) {
		t.Fatalf("Publish again = %v, %v; want the stored seqs [1 2]", seqs, err)
	}
	if last, err := log.LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("last seq %d, %v; want 2 (stored once)", last, err)
	}

	again := publishEvents(t, log) // a new commit on the old heads
	var ce *ledger.ConflictError
	if _, err := ledger.Publish(ctx, log, blobs, again); !errors.As(err, &ce) || ce.Partition != again[0].Partition {
		t.Fatalf("Publish on a moved chain = %v, want a *ConflictError on %q", err, again[0].Partition)
	}
}

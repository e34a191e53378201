package natsjs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// testTimeout bounds each test's context.
const testTimeout = 60 * time.Second

func testCtx(t testing.TB) context.Context { return testmain.Context(t, testTimeout) }

// newLedger starts a server and creates the ledger "test" on it.
func newLedger(t testing.TB, opts ...Option) (*Log, *nats.Conn) {
	t.Helper()
	_, nc := natsjstest.RunServer(t)
	l, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: "test", Blobs: "file:///tmp/blobs"}, opts...)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return l, nc
}

func newCommitID(t testing.TB) string {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pathIn returns a datastore path whose partition is key (a key without "/" that
// is not one of swamp's multi-shard directories).
func pathIn(key string, i int) string { return fmt.Sprintf("%s/file-%d", key, i) }

func entry(path string) ledger.Entry {
	return ledger.Entry{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: int64(len(path)), Mode: 0o644}
}

// part describes one event of a commit under construction.
type part struct {
	partition string
	modelSeq  uint64
	prev      ledger.Seq
	entries   []ledger.Entry // default: one file
}

// mkCommit builds a commit's events.
func mkCommit(t testing.TB, l *Log, parts ...part) []ledger.Event {
	t.Helper()
	id := newCommitID(t)
	at := time.Now().UTC()
	evs := make([]ledger.Event, len(parts))
	for i, p := range parts {
		es := p.entries
		if es == nil {
			es = []ledger.Entry{entry(pathIn(p.partition, int(p.modelSeq)))}
		}
		evs[i] = ledger.Event{
			V: ledger.FormatVersion, Ledger: l.UUID(), Commit: id, Host: "host-a", At: at,
			Partition: p.partition, ModelSeq: p.modelSeq, Prev: p.prev,
			Parts: len(parts), Part: i + 1, Entries: es,
		}
	}
	return evs
}

// next returns the part extending partition p's chain as the log has it now.
func next(t testing.TB, l *Log, p string) part {
	t.Helper()
	r, err := l.PartitionHead(testCtx(t), p)
	if errors.Is(err, ledger.ErrNotFound) {
		return part{partition: p, modelSeq: 1}
	}
	if err != nil {
		t.Fatalf("PartitionHead(%q): %v", p, err)
	}
	return part{partition: p, modelSeq: r.Event.ModelSeq + 1, prev: r.Seq}
}

// commitNext appends a commit extending each of the partitions.
func commitNext(t testing.TB, l *Log, partitions ...string) []ledger.Seq {
	t.Helper()
	parts := make([]part, len(partitions))
	for i, p := range partitions {
		parts[i] = next(t, l, p)
	}
	seqs, err := l.Append(testCtx(t), mkCommit(t, l, parts...))
	if err != nil {
		t.Fatalf("Append(%v): %v", partitions, err)
	}
	return seqs
}

func readAll(t testing.TB, l *Log, from, to ledger.Seq) []ledger.Record {
	t.Helper()
	var rs []ledger.Record
	if err := l.Read(testCtx(t), from, to, func(r ledger.Record) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatalf("Read(%d, %d): %v", from, to, err)
	}
	return rs
}

func readPartition(t testing.TB, l *Log, p string, from ledger.Seq) []ledger.Record {
	t.Helper()
	var rs []ledger.Record
	if err := l.ReadPartition(testCtx(t), p, from, func(r ledger.Record) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatalf("ReadPartition(%q, %d): %v", p, from, err)
	}
	return rs
}

func seqsOf(rs []ledger.Record) []ledger.Seq {
	out := make([]ledger.Seq, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func lastSeq(t testing.TB, l *Log) ledger.Seq {
	t.Helper()
	s, err := l.LastSeq(testCtx(t))
	if err != nil {
		t.Fatalf("LastSeq: %v", err)
	}
	return s
}

// checkChain verifies that rs, a partition's records, are modelSeq 1..n with
// matching prev.
func checkChain(t testing.TB, rs []ledger.Record) {
	t.Helper()
	var prev ledger.Seq
	for i, r := range rs {
		if r.Event.ModelSeq != uint64(i+1) || r.Event.Prev != prev {
			t.Fatalf("record %d (seq %d): modelSeq %d prev %d, want modelSeq %d prev %d", i, r.Seq, r.Event.ModelSeq, r.Event.Prev, i+1, prev)
		}
		prev = r.Seq
	}
}

// newBucket makes a side bucket of ledger ledgerName as the admin does
// (expect.go kvBucket) and opens it.
func newBucket(t testing.TB, js jetstream.JetStream, ledgerName, bucket string) jetstream.KeyValue {
	t.Helper()
	if _, err := provision(testCtx(t), js, kvBucket(ledgerName, bucket), 1); err != nil {
		t.Fatal(err)
	}
	kv, err := openKVBucket(testCtx(t), js, ledgerName, bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// spyConsumerCreates counts the consumer create requests anyone sends to the
// server at url from now on (a subscription beside the JetStream API's):
// the function it returns flushes and reads the count.
func spyConsumerCreates(t testing.TB, url string) func() int {
	t.Helper()
	spy := natsjstest.Connect(t, url)
	var n atomic.Int32
	for _, subj := range []string{apiPrefix + "CONSUMER.CREATE.>", apiPrefix + "CONSUMER.DURABLE.CREATE.>"} {
		if _, err := spy.Subscribe(subj, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() int {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // what was sent has reached the spy
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		return int(n.Load())
	}
}

// prepareCommit is what an Append hands the driver's publish: the batch
// ledger.Log checks and encodes, made a commit.
func prepareCommit(l *Log, events []ledger.Event, fences []ledger.Fence) (*commit, error) {
	b, err := ledger.NewAppendBatch(l.d.info, events, fences)
	if err != nil {
		return nil, err
	}
	return l.d.prepare(b)
}

package natsjs

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

var benchStreamEvents = flag.Int("bench.stream-events", 10_000, "events in the stream of BenchmarkReadPartitionLarge (the documented run uses 1000000)")

// BenchmarkReadPartitionLarge reads one partition's 250 events out of a stream of
// -bench.stream-events events (the figure: 1,000,000), the way a scoped
// sync reads a model (ReadPartition: batched direct gets by subject, from the
// mark), beside the subject-filtered ordered consumer that measured 238 ms here.
// The cost should follow the 250, not the stream:
//
//	TMPDIR=/dev/shm go test -run '^$' -bench ReadPartitionLarge -benchtime 20x ./ledger/natsjs/ -args -bench.stream-events=1000000
func BenchmarkReadPartitionLarge(b *testing.B) {
	const hot = 250
	total := max(*benchStreamEvents, 10*hot)
	l, nc := newLedger(b)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	event := func(partition, path string, modelSeq uint64, prev ledger.Seq) []byte {
		if modelSeq > 1 && prev == 0 {
			prev = ledger.Seq(modelSeq) // the filler's chain is never read
		}
		e := ledger.Event{V: ledger.FormatVersion, Ledger: l.UUID(), Commit: "019a1b2c-3d4e-7f60-8a1b-2c3d4e5f6a7b",
			Host: "bench", At: at, Partition: partition, ModelSeq: modelSeq, Prev: prev, Parts: 1, Part: 1,
			Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: 1, Mode: 0o644}}}
		body, err := ledger.EncodeEvent(e)
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	every := total / hot
	var hotSeq, fillSeq uint64
	var hotPrev ledger.Seq // a fresh stream: the i-th publish is stored at seq i+1
	start := time.Now()
	for i := range total {
		var subj string
		var body []byte
		if i%every == every-1 && hotSeq < hot {
			hotSeq++
			subj, body = ledger.Subject(l.Name(), "data--t--hot"), event("data--t--hot", fmt.Sprintf("data/t/hot/d/%d/raw", hotSeq), hotSeq, hotPrev)
			hotPrev = ledger.Seq(i + 1)
		} else {
			fillSeq++
			subj, body = ledger.Subject(l.Name(), "audit"), event("audit", "audit/log", fillSeq, 0)
		}
		if _, err := js.PublishAsync(subj, body); err != nil {
			b.Fatal(err)
		}
		if i%10_000 == 9_999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	b.Logf("filled %d events (%d in the read partition) in %v", total, hotSeq, time.Since(start))
	b.ResetTimer()

	b.Run("ReadPartition", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := l.ReadPartition(ctx, "data--t--hot", 1, func(ledger.Record) error { n++; return nil }); err != nil || n != hot {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("RawOrderedConsumerFiltered", func(b *testing.B) {
		for b.Loop() {
			c, err := js.OrderedConsumer(ctx, l.Stream(), jetstream.OrderedConsumerConfig{
				FilterSubjects: []string{ledger.Subject(l.Name(), "data--t--hot")}})
			if err != nil {
				b.Fatal(err)
			}
			for range hot {
				if _, err := c.Next(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

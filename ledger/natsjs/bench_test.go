package natsjs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/syncledger/syncledger/ledger"
)

// Benchmarks on one embedded, file-backed node (set TMPDIR=/dev/shm to take the
// disk's fsyncs out of the figures). The Raw* ones are the JetStream baselines the
// Log's costs compare with: the same requests without the ledger's validation,
// encoding and answer handling. Run:
//
//	go test -run '^$' -bench . ./ledger/natsjs/

func BenchmarkAppendSingle(b *testing.B) {
	l, _ := newLedger(b)
	ctx := context.Background()
	p := part{partition: "m", modelSeq: 1}
	for b.Loop() {
		seqs, err := l.Append(ctx, mkCommit(b, l, p))
		if err != nil {
			b.Fatal(err)
		}
		p.modelSeq, p.prev = p.modelSeq+1, seqs[0]
	}
}

func BenchmarkAppendBatch3(b *testing.B) {
	l, _ := newLedger(b)
	ctx := context.Background()
	ps := []part{{partition: "a", modelSeq: 1}, {partition: "b", modelSeq: 1}, {partition: "c", modelSeq: 1}}
	for b.Loop() {
		seqs, err := l.Append(ctx, mkCommit(b, l, ps...))
		if err != nil {
			b.Fatal(err)
		}
		for i := range ps {
			ps[i].modelSeq, ps[i].prev = ps[i].modelSeq+1, seqs[i]
		}
	}
}

// BenchmarkAppendFenced is BenchmarkAppendSingle under n locks' fences
// (ledger.Fence): one event and n fence checks, one atomic batch; 2 is a
// swamp model run's push (the model's lock and the global lock).
func BenchmarkAppendFenced(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l, _ := newLedger(b)
			ctx := context.Background()
			fences := make([]ledger.Fence, n)
			for i := range fences {
				fences[i] = ledger.Fence{Lock: fmt.Sprint("lock", i), Seq: takeFence(b, l, fmt.Sprint("lock", i))}
			}
			p := part{partition: "m", modelSeq: 1}
			for b.Loop() {
				seqs, err := l.Append(ctx, mkCommit(b, l, p), fences...)
				if err != nil {
					b.Fatal(err)
				}
				p.modelSeq, p.prev = p.modelSeq+1, seqs[0]
			}
		})
	}
}

// BenchmarkTakeFence is a lock's fence record: what every swamp lock taken
// adds.
func BenchmarkTakeFence(b *testing.B) {
	l, _ := newLedger(b)
	for b.Loop() {
		takeFence(b, l, "lock")
	}
}

func takeFence(b *testing.B, l *Log, lock string) ledger.Seq {
	b.Helper()
	id := mkCommit(b, l, part{partition: "x", modelSeq: 1})[0].Commit
	seq, err := l.TakeFence(context.Background(), ledger.FenceRecord{V: ledger.FormatVersion, Ledger: l.d.uuid, Lock: lock, ID: id, Host: "h", At: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	return seq
}

// BenchmarkLastSeq compares the ways to learn the stream's last seq.
func BenchmarkLastSeq(b *testing.B) {
	l, nc := newLedger(b)
	ctx := context.Background()
	for range 100 {
		commitNext(b, l, "a", "b")
	}
	b.Run("LastSeq", func(b *testing.B) { // raw stream info, state only parsed
		for b.Loop() {
			if s, err := l.LastSeq(ctx); err != nil || s != 200 {
				b.Fatal(s, err)
			}
		}
	})
	b.Run("RawStreamInfo", func(b *testing.B) { // nats.go jetstream Stream.Info
		s, err := l.d.js.Stream(ctx, l.Stream())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if info, err := s.Info(ctx); err != nil || info.State.LastSeq != 200 {
				b.Fatal(err)
			}
		}
	})
	b.Run("RawDirectGetLast", func(b *testing.B) { // direct get, last by wildcard subject
		body, _ := json.Marshal(msgGetRequest{LastFor: ledger.SubjectPrefix("test") + ">"})
		for b.Loop() {
			m, err := nc.Request(apiPrefix+"DIRECT.GET."+l.Stream(), body, DefaultTimeout)
			if err != nil || m.Header.Get(jetstream.SequenceHeader) != "200" {
				b.Fatal(err, m.Header)
			}
		}
	})
}

func BenchmarkPartitionLastSeq(b *testing.B) {
	l, _ := newLedger(b)
	ctx := context.Background()
	for range 100 {
		commitNext(b, l, "a", "b")
	}
	for b.Loop() {
		if s, err := l.PartitionLastSeq(ctx, "a"); err != nil || s != 199 {
			b.Fatal(s, err)
		}
	}
}

// BenchmarkReadPartition reads one partition's 100 events out of a stream of
// 1,000 (cost follows the 100).
func BenchmarkReadPartition(b *testing.B) {
	l, _ := newLedger(b)
	ctx := context.Background()
	ps := make([]string, 10)
	for j := range ps {
		ps[j] = fmt.Sprintf("p%d", j)
	}
	for range 100 {
		commitNext(b, l, ps...)
	}
	for b.Loop() {
		n := 0
		if err := l.ReadPartition(ctx, "p3", 1, func(ledger.Record) error { n++; return nil }); err != nil || n != 100 {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/record")
}

// BenchmarkRead reads 1,000 events in stream order, with Read and with a raw
// ordered consumer.
func BenchmarkRead(b *testing.B) {
	l, _ := newLedger(b)
	ctx := context.Background()
	for range 200 {
		commitNext(b, l, "a", "b", "c", "d", "e")
	}
	b.Run("Read", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := l.Read(ctx, 1, 0, func(ledger.Record) error { n++; return nil }); err != nil || n != 1000 {
				b.Fatal(n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/record")
	})
	b.Run("RawDirectGetBatch", func(b *testing.B) { // the same requests as Read, no decoding
		for b.Loop() {
			n := 0
			for n < 1000 {
				msgs, _, err := l.d.directBatch(ctx, msgGetRequest{Seq: uint64(n + 1), Batch: directBatchSize, MaxBytes: directMaxBytes})
				if err != nil || len(msgs) == 0 {
					b.Fatal(n, err)
				}
				n += len(msgs)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/record")
	})
	b.Run("DecodeOnly", func(b *testing.B) {
		m, _, err := l.d.directLast(ctx, ledger.Subject("test", "c"))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := l.d.decode(m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(m.Data)), "bytes/event")
	})
	b.Run("RawOrderedConsumer", func(b *testing.B) {
		for b.Loop() {
			c, err := l.d.js.OrderedConsumer(ctx, l.Stream(), jetstream.OrderedConsumerConfig{
				DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 1,
			})
			if err != nil {
				b.Fatal(err)
			}
			it, err := c.Messages()
			if err != nil {
				b.Fatal(err)
			}
			for range 1000 {
				if _, err := it.Next(); err != nil {
					b.Fatal(err)
				}
			}
			it.Stop()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/record")
	})
}

// BenchmarkRawPublishExpectSubjSeq: a plain JetStream publish with an expected
// last subject seq and a message id.
func BenchmarkRawPublishExpectSubjSeq(b *testing.B) {
	l, _ := newLedger(b)
	ctx := context.Background()
	data := mustEncode(b, mkCommit(b, l, part{partition: "m", modelSeq: 1})[0])
	subj := ledger.Subject("test", "m")
	var prev uint64
	i := 0
	for b.Loop() {
		i++
		ack, err := l.d.js.Publish(ctx, subj, data, jetstream.WithExpectLastSequencePerSubject(prev), jetstream.WithMsgID(strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		prev = ack.Sequence
	}
}

// BenchmarkRawAtomicBatch3: orbit.go's atomic batch of 3 messages, with the
// per-subject expected seq on each, with and without waiting for the first
// message's ack.
func BenchmarkRawAtomicBatch3(b *testing.B) {
	for _, ackFirst := range []bool{false, true} {
		b.Run(fmt.Sprintf("AckFirst=%v", ackFirst), func(b *testing.B) {
			l, _ := newLedger(b)
			ctx := context.Background()
			data := mustEncode(b, mkCommit(b, l, part{partition: "m", modelSeq: 1})[0])
			prev := [3]uint64{}
			i := 0
			for b.Loop() {
				msgs := make([]*nats.Msg, 3)
				for j := range msgs {
					i++
					msgs[j] = nats.NewMsg(ledger.Subject("test", fmt.Sprintf("p%d", j)))
					msgs[j].Data = data
					msgs[j].Header.Set(jetstream.MsgIDHeader, strconv.Itoa(i))
					msgs[j].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(prev[j], 10))
				}
				ack, err := jetstreamext.PublishMsgBatch(ctx, l.d.js, msgs, jetstreamext.BatchFlowControl{AckFirst: ackFirst, AckTimeout: DefaultTimeout})
				if err != nil {
					b.Fatal(err)
				}
				for j := range prev {
					prev[j] = ack.Sequence - uint64(2-j)
				}
			}
		})
	}
}

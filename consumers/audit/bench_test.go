package audit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/audit"
	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// benchLedger is one ledger preloaded with benchCommits commits (a third of them
// touching two partitions), shared by the sub-benchmarks of one run so that they
// read the same stream.
var (
	benchOnce   sync.Once
	benchL      *consumertest.Ledger
	benchNC     *nats.Conn
	benchEvents int
	benchLast   ledger.Seq
)

const benchCommits = 10000

func loadBench(b *testing.B) {
	benchOnce.Do(func() {
		// On a real server: the bench measures what production runs.
		_, nc := natsjstest.RunServer(b)
		ctx := context.Background()
		log, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "bench", Blobs: "file://" + b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		feed, err := natsjs.NewFeed(nc, "bench")
		if err != nil {
			b.Fatal(err)
		}
		benchNC, benchL = nc, consumertest.On(log, feed, nil, "bench", log.UUID())
		// Writers on disjoint partitions append concurrently (no chain conflicts).
		const writers = 8
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range benchCommits / writers {
					parts := []string{fmt.Sprintf("p%d-%d", w, i%6)}
					if i%3 == 0 {
						parts = append(parts, fmt.Sprintf("q%d-%d", w, i%2))
					}
					seqs := benchL.Commit(b, parts...)
					mu.Lock()
					benchEvents += len(seqs)
					benchLast = max(benchLast, seqs[len(seqs)-1])
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	})
}

// BenchmarkConsumerThroughput compares, on one preloaded ledger in one run:
//
//	raw     a durable pull consumer acknowledging every event (no decoding)
//	runner  the Runner with a handler that does nothing (decode, assemble, ack)
//	audit   the Runner with the audit Writer, fsync at each flush
//	audit-nofsync  the same without fsync
//
// Each iteration reads the whole ledger with a new consumer. Run it with
// -benchtime=1x (the ledger is loaded once per process).
func BenchmarkConsumerThroughput(b *testing.B) {
	loadBench(b)
	l := benchL
	n := 0
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(benchEvents)/time.Since(start).Seconds(), "events/s")
		b.ReportMetric(float64(benchCommits)/time.Since(start).Seconds(), "commits/s")
	}
	b.Run("raw", func(b *testing.B) {
		js, err := jetstream.New(benchNC)
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			n++
			ctx := context.Background()
			start := time.Now()
			c, err := js.CreateConsumer(ctx, ledger.StreamName(l.Name), jetstream.ConsumerConfig{
				Durable: fmt.Sprintf("raw%d", n), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4096,
			})
			if err != nil {
				b.Fatal(err)
			}
			it, err := c.Messages(jetstream.PullMaxMessages(512))
			if err != nil {
				b.Fatal(err)
			}
			for {
				m, err := it.Next()
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Ack(); err != nil {
					b.Fatal(err)
				}
				md, _ := m.Metadata()
				if ledger.Seq(md.Sequence.Stream) == benchLast {
					break
				}
			}
			it.Stop()
			report(b, start)
		}
	})
	runner := func(b *testing.B, mk func(b *testing.B) consumers.Handler) {
		for range b.N {
			n++
			h := mk(b)
			r, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: fmt.Sprintf("r%d", n), Handler: h})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- r.Run(ctx) }()
			for r.Stats().Seq < benchLast {
				time.Sleep(time.Millisecond)
			}
			report(b, start)
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("runner", func(b *testing.B) {
		runner(b, func(*testing.B) consumers.Handler {
			return consumers.HandlerFunc(func(context.Context, consumers.Commit) error { return nil })
		})
	})
	for _, sync := range []bool{true, false} {
		name := "audit"
		if !sync {
			name = "audit-nofsync"
		}
		b.Run(name, func(b *testing.B) {
			runner(b, func(b *testing.B) consumers.Handler {
				w, err := audit.Open(audit.Config{Ledger: l.Name, Path: filepath.Join(b.TempDir(), "audit.jsonl"), Sync: sync})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { w.Close() })
				return w
			})
		})
	}
}

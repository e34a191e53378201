package snapshot

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

var benchCommits = flag.Int("bench.commits", 20000, "commits in BenchmarkReplay's ledger (the issue's size: 1000000)")

// BenchmarkReplay measures the metadata-only replay (Build, from no snapshot)
// against reading the same events raw from the log (CommitLog.Read, the batched
// direct gets Build reads with), on one ledger of -bench.commits single-file
// commits over 1,000 partitions:
//
//	go test ./projector/snapshot -run '^$' -bench BenchmarkReplay -benchtime 1x -bench.commits 1000000
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	_, nc := natsjstest.RunServer(b)
	lg, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "bench", Blobs: "file:///unused"})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	fill(b, lg, *benchCommits, 1000)
	b.Logf("appended %d commits in %v", *benchCommits, time.Since(start))
	events := float64(*benchCommits)

	b.Run("raw-read", func(b *testing.B) {
		for range b.N {
			n := 0
			if err := lg.Read(ctx, 1, 0, func(ledger.Record) error { n++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("build", func(b *testing.B) {
		var peak uint64
		for range b.N {
			done := make(chan struct{})
			go func() { // sample the heap while Build runs
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
					select {
					case <-done:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}()
			s, err := Build(ctx, BuildConfig{Log: lg})
			close(done)
			if err != nil {
				b.Fatal(err)
			}
			if s.Seq != ledger.Seq(*benchCommits) {
				b.Fatalf("built to seq %d", s.Seq)
			}
		}
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	})
}

// fill appends n single-event commits over parts partitions, from 8 writers
// each owning a share of the partitions.
func fill(b *testing.B, lg *natsjs.Log, n, parts int) {
	ctx := context.Background()
	info, err := lg.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			marks := map[string][2]uint64{} // partition → modelSeq, seq
			for i := w; i < n; i += writers {
				p := fmt.Sprintf("audit%d", (i/writers)%(parts/writers)*writers+w)
				m := marks[p]
				id, _ := ledger.NewCommitID(rand.Reader)
				path := fmt.Sprintf("%s/f%d", p, i%17)
				ev := ledger.Event{V: ledger.FormatVersion, Ledger: info.UUID, Commit: id, Host: "bench", At: time.Now(),
					Partition: p, ModelSeq: m[0] + 1, Prev: ledger.Seq(m[1]), Parts: 1, Part: 1,
					Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(id)), Size: 36, Mode: 0o644}}}
				if ledger.PartitionKey(path) != p {
					errs <- fmt.Errorf("path %s is not in partition %s", path, p)
					return
				}
				seqs, err := lg.Append(ctx, []ledger.Event{ev})
				if err != nil {
					errs <- err
					return
				}
				marks[p] = [2]uint64{m[0] + 1, uint64(seqs[0])}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

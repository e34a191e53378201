package natsjs

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// BenchmarkFollowLatency: the time from a commit's append (its publish sent)
// to its delivery at every follower, each follower on a connection of its
// own, one commit at a time; p50 and p99 over the iterations (the watch
// latency of BENCHMARKS.md). Run:
//
//	go test -run '^$' -bench FollowLatency -benchtime 200x ./ledger/natsjs/
func BenchmarkFollowLatency(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("followers=%d", n), func(b *testing.B) {
			srv, nc := natsjstest.RunServer(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := CreateLog(ctx, nc, LedgerConfig{Name: "lat"})
			if err != nil {
				b.Fatal(err)
			}
			got := make(chan ledger.Seq, 16*n)
			done := make(chan error, n)
			for range n {
				fc, err := nats.Connect(srv.ClientURL())
				if err != nil {
					b.Fatal(err)
				}
				defer fc.Close()
				l, err := OpenLog(ctx, fc, "lat")
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					done <- l.Follow(ctx, 1, func(r ledger.Record) error { got <- r.Seq; return nil })
				}()
			}
			wait := func(seq ledger.Seq) {
				for k := 0; k < n; {
					select {
					case s := <-got:
						if s == seq {
							k++
						}
					case err := <-done:
						b.Fatalf("Follow: %v", err)
					case <-time.After(30 * time.Second):
						b.Fatalf("%d of %d followers did not deliver seq %d", n-k, n, seq)
					}
				}
			}
			wait(commitNext(b, w, "m")[0]) // every follower is following
			var lat []time.Duration
			for b.Loop() {
				evs := mkCommit(b, w, next(b, w, "m"))
				start := time.Now()
				seqs, err := w.Append(ctx, evs)
				if err != nil {
					b.Fatal(err)
				}
				wait(seqs[0])
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

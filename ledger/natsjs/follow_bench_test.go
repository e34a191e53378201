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

// BenchmarkFleet (issue 40): 10,000 followers of one embedded server
// through the hosts' read path (Log.Follow: the stream's republish plus
// direct gets), 100 to a connection; the time from a commit's append to its
// delivery at every follower, p50 and p99 over the iterations; the server's
// consumers while they follow (the target: 0) and its resident memory
// before and after they started, per follower. Its baseline, in the same
// run: as many plain NATS subscriptions, a publish to them all. Run:
//
//	go test -run '^$' -bench Fleet -benchtime 20x ./ledger/natsjs/
func BenchmarkFleet(b *testing.B) {
	b.Run("read-path", benchFleet)
	b.Run("raw-subscriptions", benchFleetRaw)
}

const fleetFollowers, fleetPerConn = 10000, 100

func benchFleet(b *testing.B) {
	const followers, perConn = fleetFollowers, fleetPerConn
	srv, nc := natsjstest.RunServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := CreateLog(ctx, nc, LedgerConfig{Name: "fleet"})
	if err != nil {
		b.Fatal(err)
	}
	before, err := srv.RSS()
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan ledger.Seq, 4*followers)
	done := make(chan error, followers)
	for i := 0; i < followers; i += perConn {
		fc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		defer fc.Close()
		l, err := OpenLog(ctx, fc, "fleet")
		if err != nil {
			b.Fatal(err)
		}
		for range perConn {
			go func() {
				done <- l.Follow(ctx, 1, func(r ledger.Record) error { got <- r.Seq; return nil })
			}()
		}
	}
	wait := func(seq ledger.Seq) {
		for k := 0; k < followers; {
			select {
			case s := <-got:
				if s == seq {
					k++
				}
			case err := <-done:
				b.Fatalf("Follow: %v", err)
			case <-time.After(60 * time.Second):
				b.Fatalf("%d of %d followers did not deliver seq %d", followers-k, followers, seq)
			}
		}
	}
	wait(commitNext(b, w, "m")[0]) // every follower is following
	after, err := srv.RSS()
	if err != nil {
		b.Fatal(err)
	}
	var st struct {
		apiResponse
		State struct {
			Consumers int `json:"consumer_count"`
		} `json:"state"`
	}
	if err := w.d.request(ctx, apiPrefix+"STREAM.INFO."+w.d.stream, nil, &st); err != nil {
		b.Fatal(err)
	}
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
	b.ReportMetric(float64(st.State.Consumers), "consumers")
	b.ReportMetric(float64(before)/(1<<20), "server-MiB-before")
	b.ReportMetric(float64(after)/(1<<20), "server-MiB-after")
	b.ReportMetric(float64(after-before)/followers/1024, "server-KiB/follower")
}

// benchFleetRaw is BenchmarkFleet's baseline: fleetFollowers plain
// subscriptions, fleetPerConn to a connection, one publish reaching them
// all, timed from the publish to the last delivery.
func benchFleetRaw(b *testing.B) {
	srv, nc := natsjstest.RunServer(b)
	before, err := srv.RSS()
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan struct{}, 4*fleetFollowers)
	for i := 0; i < fleetFollowers; i += fleetPerConn {
		fc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		defer fc.Close()
		for range fleetPerConn {
			if _, err := fc.Subscribe("fleet.raw", func(*nats.Msg) { got <- struct{}{} }); err != nil {
				b.Fatal(err)
			}
		}
		if err := fc.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	after, err := srv.RSS()
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := nc.Publish("fleet.raw", []byte("x")); err != nil {
			b.Fatal(err)
		}
		for range fleetFollowers {
			select {
			case <-got:
			case <-time.After(60 * time.Second):
				b.Fatal("a subscription did not deliver")
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(after-before)/fleetFollowers/1024, "server-KiB/follower")
}

//go:build server

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/syncledger/syncledger/consumers/metrics"
)

// The flag's default (consume_metrics.go) is the package's: a compile error
// (constant index out of range) otherwise.
var _ = [1]struct{}{}[defaultMaxPartitions-metrics.DefaultMaxPartitions]

// runConsumeMetrics is consume metrics: the consumer counting commits, and its
// endpoint.
func runConsumeMetrics(ctx context.Context, a *app, o *consumeOpts, listen string, maxPartitions int) error {
	feed, err := a.Feed(ctx)
	if err != nil {
		return err
	}
	hb, err := a.Heartbeats(ctx)
	if err != nil {
		return err
	}
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	lg, err := a.ledgerOn(ctx, a.ledgerName)
	if err != nil {
		return err
	}
	e, err := metrics.New(metrics.Config{Feed: feed, Heartbeats: hb, Log: l, Ledger: a.ledgerName, Blobs: consumeBlobs(ctx, a),
		Server: lg.ServerState, MaxPartitions: maxPartitions, Logger: a.logger})
	if err != nil {
		return err
	}
	return serveMetrics(ctx, a, o, e, listen)
}

// serveMetrics serves e's endpoint while the consumer runs.
func serveMetrics(ctx context.Context, a *app, o *consumeOpts, e *metrics.Exporter, listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("metrics endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.HTTPHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(a.stdout, "metrics on http://%s/metrics\n", ln.Addr())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- o.run(cctx, a, e) }()
	select {
	case err = <-runErr:
	case err = <-served:
		cancel()
		<-runErr
		err = fmt.Errorf("metrics endpoint: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return err
}

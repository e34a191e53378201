package main

import (
	"github.com/spf13/cobra"
)

// defaultMaxPartitions is --max-partitions' default: metrics.DefaultMaxPartitions,
// which the default build does not link (consume_metrics_server.go checks
// that they agree).
const defaultMaxPartitions = 1000

// newConsumeMetricsCmd is consume metrics. It runs in the server build
// (consume_metrics_server.go); the default build hands it over
// (runConsumeMetrics in serve_exec.go).
func newConsumeMetricsCmd(a *app) *cobra.Command {
	var (
		o             consumeOpts
		listen        string
		maxPartitions int
	)
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Serve Prometheus metrics of the ledger, its consumers and its hosts",
		Long: `Metrics counts the commits it consumes (commits, events per partition, bytes,
files) and serves them at http://--listen/metrics with, read at each scrape, the
ledger's head and first seq, every consumer's lag, ack floor and dead letters,
every host's HWM, lag behind the head and last heartbeat (from the hosts'
heartbeat bucket; see syncledger hosts), and whether the server refuses writes
for lack of space (syncledger_server_full, with a full serve's free space).`,
		Example: `  syncledger consume metrics --listen 127.0.0.1:9464`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConsumeMetrics(cmd.Context(), a, &o, listen, maxPartitions)
		},
	}
	fs := cmd.Flags()
	o.addFlags(fs, "metrics", "new")
	fs.StringVar(&listen, "listen", "127.0.0.1:9464", "address of the metrics endpoint (port 0 picks one)")
	fs.IntVar(&maxPartitions, "max-partitions", defaultMaxPartitions, "distinct partition label values; more are counted as _other")
	return cmd
}

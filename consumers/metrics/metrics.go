// Package metrics is the metrics consumer: a consumers.Handler that counts the
// ledger's commits and serves them, with the ledger's and its readers'
// positions, as Prometheus metrics.
//
// Counted from the commits the consumer handles (since the process started;
// Prometheus' rate() and increase() handle restarts):
//
//	syncledger_commits_total                      commits
//	syncledger_events_total{partition}            events (commit parts) per partition
//	syncledger_bytes_total                        bytes of the files the commits write
//	syncledger_files_total{op="write"|"delete"}   file entries
//	syncledger_last_commit_seq                    seq of the last commit handled
//	syncledger_last_commit_timestamp_seconds      its commit time
//
// Read from the ports at each scrape (the log, the feed, the heartbeats):
//
//	syncledger_stream_head_seq, syncledger_stream_first_seq   the ledger's bounds
//	syncledger_consumer_lag{consumer}             events not yet acknowledged
//	syncledger_consumer_ack_floor_seq{consumer}
//	syncledger_consumer_dead_letters{consumer}
//	syncledger_host_hwm_seq{host}                 from the hosts' heartbeats
//	syncledger_host_lag{host}                     head − hwm
//	syncledger_host_last_seen_timestamp_seconds{host}
//	syncledger_server_full                        1 while the server refuses writes for lack of space
//	syncledger_server_stored_bytes                what the server's store holds
//	syncledger_server_disk_free_bytes, syncledger_server_disk_resume_bytes
//	                                              a full serve's free space, and where it takes writes again
//	syncledger_collect_up{source="stream"|"consumers"|"hosts"|"server"}  1 if that read worked
//
// Every metric has the constant label ledger="<name>". The partition label has
// at most Config.MaxPartitions values; further partitions are counted under
// partition="_other".
//
// The endpoint is the Prometheus client library's (promhttp): it speaks the
// exposition formats a scraper asks for. The package is linked only into the
// server build of syncledger (consume metrics runs there; see BENCHMARKS.md,
// B11): the library's and protobuf's package inits would cost every other
// command's start-up.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
)

// Defaults of Config.
const (
	DefaultMaxPartitions = 1000
	DefaultScrapeTimeout = 5 * time.Second
)

// OtherPartition is the partition label of partitions beyond MaxPartitions.
const OtherPartition = "_other"

// Config configures an Exporter.
type Config struct {
	Log  ledger.CommitLog
	Feed ledger.Feed // the consumers' positions
	// Heartbeats is the ledger's heartbeat bucket (see consumers/heartbeat).
	Heartbeats ledger.KV
	Ledger     string // ledger name
	// Blobs, when set, is read for the sizes of commits kept in manifests.
	Blobs *ledger.Bucket
	// Server, when set, asks the ledger's server whether it takes writes
	// (natsjs.Ledger.ServerState) at each scrape.
	Server func(ctx context.Context) (ledger.ServerState, error)
	// MaxPartitions bounds the partition label's values; 0 means DefaultMaxPartitions.
	MaxPartitions int
	// ScrapeTimeout bounds the server reads of one scrape; 0 means DefaultScrapeTimeout.
	ScrapeTimeout time.Duration
	// Logger receives failed reads; nil discards.
	Logger *slog.Logger
}

// Exporter is the metrics handler and the counters it keeps.
type Exporter struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry // the counters

	commits, bytes  prometheus.Counter
	events, files   *prometheus.CounterVec // by partition, by op
	lastSeq, lastAt prometheus.Gauge

	mu         sync.Mutex          // guards partitions
	partitions map[string]struct{} // the partition label values in use

	// The families read from the server at each scrape.
	head, first, lag, ackFloor, dead, hwm, hostLag, seen, skipped, up *prometheus.Desc
	full, stored, free, resume                                        *prometheus.Desc

	hb *heartbeat.Store
}

var _ consumers.Handler = (*Exporter)(nil)

// New validates cfg and returns an Exporter.
func New(cfg Config) (*Exporter, error) {
	if cfg.Log == nil || cfg.Feed == nil || cfg.Heartbeats == nil {
		return nil, fmt.Errorf("new metrics: a log, a feed and a heartbeat bucket are required: %w", ledger.ErrInvalid)
	}
	if err := ledger.ValidateName(cfg.Ledger); err != nil {
		return nil, err
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = DefaultScrapeTimeout
	}
	e := &Exporter{cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry(), partitions: map[string]struct{}{}, hb: heartbeat.NewStore(cfg.Heartbeats)}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	constant := prometheus.Labels{"ledger": cfg.Ledger}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constant})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constant})
	}
	e.commits = counter("syncledger_commits_total", "Commits handled by this exporter.")
	e.bytes = counter("syncledger_bytes_total", "Bytes of the files written by the commits handled.")
	e.events = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "syncledger_events_total",
		Help: "Events (commit parts) handled, per partition.", ConstLabels: constant}, []string{"partition"})
	e.files = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "syncledger_files_total",
		Help: "File entries of the commits handled, by operation.", ConstLabels: constant}, []string{"op"})
	e.files.WithLabelValues("write")
	e.files.WithLabelValues("delete")
	e.lastSeq = gauge("syncledger_last_commit_seq", "Seq of the last commit handled.")
	e.lastAt = gauge("syncledger_last_commit_timestamp_seconds", "Commit time of the last commit handled.")
	e.reg.MustRegister(e.commits, e.bytes, e.events, e.files, e.lastSeq, e.lastAt)

	desc := func(name, help string, label ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, label, constant)
	}
	e.head = desc("syncledger_stream_head_seq", "The ledger's last seq.")
	e.first = desc("syncledger_stream_first_seq", "The ledger's first seq.")
	e.lag = desc("syncledger_consumer_lag", "Events of the consumer's filter not yet acknowledged.", "consumer")
	e.ackFloor = desc("syncledger_consumer_ack_floor_seq", "Seq up to which the consumer has acknowledged every event.", "consumer")
	e.dead = desc("syncledger_consumer_dead_letters", "Messages on the consumer's dead-letter subject.", "consumer")
	e.hwm = desc("syncledger_host_hwm_seq", "The host's high-water mark, from its heartbeat.", "host")
	e.hostLag = desc("syncledger_host_lag", "The ledger's last seq minus the host's HWM.", "host")
	e.seen = desc("syncledger_host_last_seen_timestamp_seconds", "When the server stored the host's last heartbeat.", "host")
	e.skipped = desc("syncledger_hosts_skipped", "Keys of the heartbeat bucket whose values are not heartbeats (skipped; see syncledger hosts).")
	e.up = desc("syncledger_collect_up", "1 if the scrape-time read of the source worked.", "source")
	e.full = desc("syncledger_server_full", "1 while the server refuses writes for lack of space (see docs/ops.md, A full disk).")
	e.stored = desc("syncledger_server_stored_bytes", "Bytes the server's store holds.")
	e.free = desc("syncledger_server_disk_free_bytes", "Bytes free on a full serve's data directory's filesystem.")
	e.resume = desc("syncledger_server_disk_resume_bytes", "Free bytes at which a full serve takes writes again.")
	return e, nil
}

// Handle counts c.
func (e *Exporter) Handle(ctx context.Context, c consumers.Commit) error {
	s, err := consumers.Summarize(ctx, e.cfg.Ledger, c, e.cfg.Blobs)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range s.Partitions {
		if _, ok := e.partitions[p]; !ok {
			if len(e.partitions) >= e.cfg.MaxPartitions {
				p = OtherPartition
			} else {
				e.partitions[p] = struct{}{}
			}
		}
		e.events.WithLabelValues(p).Inc()
	}
	e.commits.Inc()
	e.bytes.Add(float64(s.Bytes))
	e.files.WithLabelValues("write").Add(float64(s.Files))
	e.files.WithLabelValues("delete").Add(float64(s.Deleted))
	e.lastSeq.Set(float64(s.Seq))
	e.lastAt.Set(float64(s.At.UnixNano()) / 1e9)
	return nil
}

// HTTPHandler serves the metrics: the counters, and the positions read from
// the server for this request; a read that fails is reported by its
// syncledger_collect_up sample, the rest is served.
func (e *Exporter) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := prometheus.NewRegistry()
		now.MustRegister(positions{e: e, ctx: r.Context()})
		promhttp.HandlerFor(prometheus.Gatherers{e.reg, now}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}

// positions collects the families read from the server, under the context of
// the scrape's request.
type positions struct {
	e   *Exporter
	ctx context.Context
}

// Describe sends nothing: the collector is unchecked (its families depend on
// what the server holds).
func (positions) Describe(chan<- *prometheus.Desc) {}

func (p positions) Collect(ch chan<- prometheus.Metric) {
	e := p.e
	ctx, cancel := context.WithTimeout(p.ctx, e.cfg.ScrapeTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, label ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label...)
	}
	up := func(source string, err error) bool {
		v := 1.0
		if err != nil {
			e.log.Warn("metrics: read failed", "source", source, "err", err)
			v = 0
		}
		gauge(e.up, v, source)
		return err == nil
	}
	b, err := e.cfg.Log.Bounds(ctx)
	if up("stream", err) {
		gauge(e.head, float64(b.Last))
		gauge(e.first, float64(b.First))
	}
	ps, err := consumers.Positions(ctx, e.cfg.Feed)
	if up("consumers", err) {
		for _, c := range ps {
			gauge(e.lag, float64(c.Lag), c.Name)
			gauge(e.ackFloor, float64(c.AckFloor), c.Name)
			gauge(e.dead, float64(c.DeadLetters), c.Name)
		}
	}
	// Every host may write any key of the heartbeat bucket: a value that is no
	// heartbeat is counted and skipped, and the other hosts' series stay.
	list, err := e.hb.Scan(ctx)
	if up("hosts", err) {
		for _, b := range list.Bad {
			e.log.Warn("metrics: skipping a value of the heartbeat bucket that is not a heartbeat", "key", b.Key, "why", b.Err)
		}
		gauge(e.skipped, float64(len(list.Bad)))
		for _, h := range list.Beats {
			gauge(e.hwm, float64(h.HWM), h.Host)
			if b.Last > 0 {
				gauge(e.hostLag, float64(max(b.Last, h.HWM)-h.HWM), h.Host)
			}
			gauge(e.seen, float64(h.Seen.UnixNano())/1e9, h.Host)
		}
	}
	if e.cfg.Server != nil {
		st, err := e.cfg.Server(ctx)
		if up("server", err) {
			full := 0.0
			if st.Full {
				full = 1
			}
			gauge(e.full, full)
			gauge(e.stored, float64(st.Stored))
			if st.Full && st.Dir != "" {
				gauge(e.free, float64(st.Free))
				gauge(e.resume, float64(st.Resume))
			}
		}
	}
}

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
// Read from the server at each scrape:
//
//	syncledger_stream_head_seq, syncledger_stream_first_seq   the ledger's bounds
//	syncledger_consumer_lag{consumer}             events not yet acknowledged
//	syncledger_consumer_ack_floor_seq{consumer}
//	syncledger_consumer_dead_letters{consumer}
//	syncledger_host_hwm_seq{host}                 from the hosts' heartbeats
//	syncledger_host_lag{host}                     head − hwm
//	syncledger_host_last_seen_timestamp_seconds{host}
//	syncledger_collect_up{source="stream"|"consumers"|"hosts"}  1 if that read worked
//
// Every metric has the constant label ledger="<name>". The partition label has
// at most Config.MaxPartitions values; further partitions are counted under
// partition="_other".
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
	Conn   *nats.Conn
	Log    ledger.CommitLog
	Ledger string // ledger name
	// Blobs, when set, is read for the sizes of commits kept in manifests.
	Blobs ledger.BlobStore
	// MaxPartitions bounds the partition label's values; 0 means DefaultMaxPartitions.
	MaxPartitions int
	// ScrapeTimeout bounds the server reads of one scrape; 0 means DefaultScrapeTimeout.
	ScrapeTimeout time.Duration
	// Logger receives failed reads; nil discards.
	Logger *slog.Logger
}

// Exporter is the metrics handler and its Prometheus registry.
type Exporter struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	commits, bytes  prometheus.Counter
	events, files   *prometheus.CounterVec
	lastSeq, lastAt prometheus.Gauge
	mu              sync.Mutex
	partitions      map[string]bool
	hbMu            sync.Mutex
	hb              *heartbeat.Store
	descs           descs
}

var _ consumers.Handler = (*Exporter)(nil)

type descs struct {
	head, first, lag, floor, dead, hwm, hostLag, seen, up *prometheus.Desc
}

// New validates cfg and returns an Exporter.
func New(cfg Config) (*Exporter, error) {
	if cfg.Conn == nil || cfg.Log == nil {
		return nil, fmt.Errorf("new metrics: a connection and a log are required: %w", ledger.ErrInvalid)
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
	e := &Exporter{cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry(), partitions: map[string]bool{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	cl := prometheus.Labels{"ledger": cfg.Ledger}
	e.commits = prometheus.NewCounter(prometheus.CounterOpts{Name: "syncledger_commits_total", Help: "Commits handled by this exporter.", ConstLabels: cl})
	e.bytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "syncledger_bytes_total", Help: "Bytes of the files written by the commits handled.", ConstLabels: cl})
	e.events = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "syncledger_events_total", Help: "Events (commit parts) handled, per partition.", ConstLabels: cl}, []string{"partition"})
	e.files = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "syncledger_files_total", Help: "File entries of the commits handled, by operation.", ConstLabels: cl}, []string{"op"})
	e.lastSeq = prometheus.NewGauge(prometheus.GaugeOpts{Name: "syncledger_last_commit_seq", Help: "Seq of the last commit handled.", ConstLabels: cl})
	e.lastAt = prometheus.NewGauge(prometheus.GaugeOpts{Name: "syncledger_last_commit_timestamp_seconds", Help: "Commit time of the last commit handled.", ConstLabels: cl})
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	e.descs = descs{
		head:    d("syncledger_stream_head_seq", "The ledger's last seq."),
		first:   d("syncledger_stream_first_seq", "The ledger's first seq."),
		lag:     d("syncledger_consumer_lag", "Events of the consumer's filter not yet acknowledged.", "consumer"),
		floor:   d("syncledger_consumer_ack_floor_seq", "Seq up to which the consumer has acknowledged every event.", "consumer"),
		dead:    d("syncledger_consumer_dead_letters", "Messages on the consumer's dead-letter subject.", "consumer"),
		hwm:     d("syncledger_host_hwm_seq", "The host's high-water mark, from its heartbeat.", "host"),
		hostLag: d("syncledger_host_lag", "The ledger's last seq minus the host's HWM.", "host"),
		seen:    d("syncledger_host_last_seen_timestamp_seconds", "When the server stored the host's last heartbeat.", "host"),
		up:      d("syncledger_collect_up", "1 if the scrape-time read of the source worked.", "source"),
	}
	e.files.WithLabelValues("write")
	e.files.WithLabelValues("delete")
	e.reg.MustRegister(e.commits, e.bytes, e.events, e.files, e.lastSeq, e.lastAt, (*collector)(e))
	return e, nil
}

// Registry returns the Exporter's registry (to add process or Go metrics, say).
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// HTTPHandler serves the metrics in Prometheus' exposition formats.
func (e *Exporter) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Handle counts c.
func (e *Exporter) Handle(ctx context.Context, c consumers.Commit) error {
	s, err := consumers.Summarize(ctx, e.cfg.Ledger, c, e.cfg.Blobs)
	if err != nil {
		return err
	}
	e.mu.Lock()
	for _, p := range s.Partitions {
		if !e.partitions[p] {
			if len(e.partitions) >= e.cfg.MaxPartitions {
				p = OtherPartition
			} else {
				e.partitions[p] = true
			}
		}
		e.events.WithLabelValues(p).Inc()
	}
	e.mu.Unlock()
	e.commits.Inc()
	e.bytes.Add(float64(s.Bytes))
	e.files.WithLabelValues("write").Add(float64(s.Files))
	e.files.WithLabelValues("delete").Add(float64(s.Deleted))
	e.lastSeq.Set(float64(s.Seq))
	e.lastAt.Set(float64(s.At.UnixNano()) / 1e9)
	return nil
}

// collector reads the positions at scrape time.
type collector Exporter

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	d := c.descs
	for _, x := range []*prometheus.Desc{d.head, d.first, d.lag, d.floor, d.dead, d.hwm, d.hostLag, d.seen, d.up} {
		ch <- x
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := (*Exporter)(c)
	d := e.descs
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ScrapeTimeout)
	defer cancel()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	up := func(source string, err error) bool {
		if err != nil {
			e.log.Warn("metrics: read failed", "source", source, "err", err)
			gauge(d.up, 0, source)
			return false
		}
		gauge(d.up, 1, source)
		return true
	}

	b, err := e.cfg.Log.Bounds(ctx)
	if up("stream", err) {
		gauge(d.head, float64(b.Last))
		gauge(d.first, float64(b.First))
	}
	ps, err := consumers.Positions(ctx, e.cfg.Conn, e.cfg.Ledger)
	if up("consumers", err) {
		for _, p := range ps {
			gauge(d.lag, float64(p.Lag), p.Name)
			gauge(d.floor, float64(p.AckFloor), p.Name)
			gauge(d.dead, float64(p.DeadLetters), p.Name)
		}
	}
	beats, err := e.beats(ctx)
	if up("hosts", err) {
		for _, h := range beats {
			gauge(d.hwm, float64(h.HWM), h.Host)
			if b.Last > 0 {
				gauge(d.hostLag, float64(max(b.Last, h.HWM)-h.HWM), h.Host)
			}
			gauge(d.seen, float64(h.Seen.UnixNano())/1e9, h.Host)
		}
	}
}

func (e *Exporter) beats(ctx context.Context) ([]heartbeat.Beat, error) {
	e.hbMu.Lock()
	defer e.hbMu.Unlock()
	if e.hb == nil {
		s, err := heartbeat.Open(ctx, e.cfg.Conn, e.cfg.Ledger)
		if err != nil {
			return nil, err
		}
		e.hb = s
	}
	return e.hb.List(ctx)
}

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
//
// The endpoint speaks Prometheus' text exposition format (version 0.0.4),
// written here directly: the Prometheus client library's package inits (and
// protobuf's, which it pulls in) cost every syncledger command about 8% of its
// start-up, and these few counters and gauges need none of it (issue 17).
package metrics

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

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

// ContentType is the media type of the endpoint's answer.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

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

// Exporter is the metrics handler and the counters it keeps.
type Exporter struct {
	cfg Config
	log *slog.Logger

	mu             sync.Mutex // guards the counters
	commits, bytes uint64
	events         map[string]uint64 // per partition label value
	written, dels  uint64            // file entries
	lastSeq        ledger.Seq
	lastAt         time.Time

	hbMu sync.Mutex
	hb   *heartbeat.Store
}

var _ consumers.Handler = (*Exporter)(nil)

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
	e := &Exporter{cfg: cfg, log: cfg.Logger, events: map[string]uint64{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
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
		if _, ok := e.events[p]; !ok && len(e.events) >= e.cfg.MaxPartitions {
			p = OtherPartition
		}
		e.events[p]++
	}
	e.commits++
	e.bytes += uint64(s.Bytes)
	e.written += uint64(s.Files)
	e.dels += uint64(s.Deleted)
	e.lastSeq, e.lastAt = s.Seq, s.At
	return nil
}

// HTTPHandler serves the metrics in Prometheus' text exposition format. The
// positions are read from the server at each request; a read that fails is
// reported by its syncledger_collect_up sample, the rest is served.
func (e *Exporter) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		bw := bufio.NewWriter(w)
		e.write(r.Context(), &text{w: bw, ledger: e.cfg.Ledger})
		_ = bw.Flush()
	})
}

// write writes every family: the counters, then the positions read now.
func (e *Exporter) write(ctx context.Context, t *text) {
	e.mu.Lock()
	commits, bytes, written, dels := e.commits, e.bytes, e.written, e.dels
	events := maps.Clone(e.events)
	lastSeq, lastAt := e.lastSeq, e.lastAt
	e.mu.Unlock()

	t.family("syncledger_commits_total", "counter", "Commits handled by this exporter.")
	t.uint("", "", commits)
	t.family("syncledger_bytes_total", "counter", "Bytes of the files written by the commits handled.")
	t.uint("", "", bytes)
	if len(events) > 0 {
		t.family("syncledger_events_total", "counter", "Events (commit parts) handled, per partition.")
		for _, p := range slices.Sorted(maps.Keys(events)) {
			t.uint("partition", p, events[p])
		}
	}
	t.family("syncledger_files_total", "counter", "File entries of the commits handled, by operation.")
	t.uint("op", "delete", dels)
	t.uint("op", "write", written)
	t.family("syncledger_last_commit_seq", "gauge", "Seq of the last commit handled.")
	t.uint("", "", uint64(lastSeq))
	t.family("syncledger_last_commit_timestamp_seconds", "gauge", "Commit time of the last commit handled.")
	if lastAt.IsZero() {
		t.float("", "", 0)
	} else {
		t.float("", "", float64(lastAt.UnixNano())/1e9)
	}

	ctx, cancel := context.WithTimeout(ctx, e.cfg.ScrapeTimeout)
	defer cancel()
	up := map[string]bool{}
	ok := func(source string, err error) bool {
		if err != nil {
			e.log.Warn("metrics: read failed", "source", source, "err", err)
		}
		up[source] = err == nil
		return err == nil
	}
	b, err := e.cfg.Log.Bounds(ctx)
	if ok("stream", err) {
		t.family("syncledger_stream_head_seq", "gauge", "The ledger's last seq.")
		t.uint("", "", uint64(b.Last))
		t.family("syncledger_stream_first_seq", "gauge", "The ledger's first seq.")
		t.uint("", "", uint64(b.First))
	}
	ps, err := consumers.Positions(ctx, e.cfg.Conn, e.cfg.Ledger)
	if ok("consumers", err) && len(ps) > 0 {
		slices.SortFunc(ps, func(a, b consumers.Position) int { return strings.Compare(a.Name, b.Name) })
		t.family("syncledger_consumer_lag", "gauge", "Events of the consumer's filter not yet acknowledged.")
		for _, p := range ps {
			t.uint("consumer", p.Name, p.Lag)
		}
		t.family("syncledger_consumer_ack_floor_seq", "gauge", "Seq up to which the consumer has acknowledged every event.")
		for _, p := range ps {
			t.uint("consumer", p.Name, uint64(p.AckFloor))
		}
		t.family("syncledger_consumer_dead_letters", "gauge", "Messages on the consumer's dead-letter subject.")
		for _, p := range ps {
			t.uint("consumer", p.Name, p.DeadLetters)
		}
	}
	beats, err := e.beats(ctx)
	if ok("hosts", err) && len(beats) > 0 {
		slices.SortFunc(beats, func(a, b heartbeat.Beat) int { return strings.Compare(a.Host, b.Host) })
		t.family("syncledger_host_hwm_seq", "gauge", "The host's high-water mark, from its heartbeat.")
		for _, h := range beats {
			t.uint("host", h.Host, uint64(h.HWM))
		}
		if b.Last > 0 {
			t.family("syncledger_host_lag", "gauge", "The ledger's last seq minus the host's HWM.")
			for _, h := range beats {
				t.uint("host", h.Host, uint64(max(b.Last, h.HWM)-h.HWM))
			}
		}
		t.family("syncledger_host_last_seen_timestamp_seconds", "gauge", "When the server stored the host's last heartbeat.")
		for _, h := range beats {
			t.float("host", h.Host, float64(h.Seen.UnixNano())/1e9)
		}
	}
	t.family("syncledger_collect_up", "gauge", "1 if the scrape-time read of the source worked.")
	for _, source := range []string{"consumers", "hosts", "stream"} {
		v := uint64(0)
		if up[source] {
			v = 1
		}
		t.uint("source", source, v)
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

// text writes samples in the text exposition format: a family's HELP and TYPE
// lines, then one line per sample, each with the constant ledger label and at
// most one more (labels in name order, as the format's readers expect them).
type text struct {
	w      *bufio.Writer
	ledger string
	name   string // the family being written
}

func (t *text) family(name, typ, help string) {
	t.name = name
	fmt.Fprintf(t.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (t *text) uint(label, value string, v uint64) {
	t.sample(label, value, strconv.FormatUint(v, 10))
}

func (t *text) float(label, value string, v float64) {
	switch {
	case math.IsInf(v, 1):
		t.sample(label, value, "+Inf")
	case math.IsInf(v, -1):
		t.sample(label, value, "-Inf")
	case math.IsNaN(v):
		t.sample(label, value, "NaN")
	default:
		t.sample(label, value, strconv.FormatFloat(v, 'g', -1, 64))
	}
}

func (t *text) sample(label, value, v string) {
	t.w.WriteString(t.name)
	t.w.WriteByte('{')
	if label != "" && label < "ledger" {
		t.label(label, value)
		t.w.WriteByte(',')
	}
	t.label("ledger", t.ledger)
	if label != "" && label > "ledger" {
		t.w.WriteByte(',')
		t.label(label, value)
	}
	t.w.WriteString("} ")
	t.w.WriteString(v)
	t.w.WriteByte('\n')
}

// labelEscaper escapes a label value: backslash, double quote and line feed.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func (t *text) label(name, value string) {
	t.w.WriteString(name)
	t.w.WriteString(`="`)
	labelEscaper.WriteString(t.w, value)
	t.w.WriteByte('"')
}

package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/consumers/metrics"
	"github.com/syncledger/syncledger/ledger"
)

// scrape fetches url and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return mfs
}

// value returns the value of the metric name with the given labels (besides
// ledger), and whether it is present.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if got["ledger"] != "m" {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestScrape(t *testing.T) {
	l := consumertest.New(t, "m")
	ctx := consumertest.Ctx(t)
	l.Append(t, l.Events(t, 100, "a", "b")) // seqs 1, 2
	l.Append(t, l.Events(t, 50, "b"))       // 3
	l.Append(t, l.Events(t, 7, "c"))        // 4
	l.Append(t, l.Events(t, 1, "d"))        // 5: beyond MaxPartitions

	// Another consumer, started at seq 3 and stopped at seq 5.
	other, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "slow",
		Handler: consumers.HandlerFunc(func(context.Context, consumers.Commit) error { return nil }), Start: consumers.StartAt(3)})
	if err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithCancel(ctx)
	odone := make(chan error, 1)
	go func() { odone <- other.Run(octx) }()
	consumertest.Wait(t, 10*time.Second, "slow consumer", func() bool { return other.Stats().Seq >= 5 })
	ocancel()
	<-odone
	l.Append(t, l.Events(t, 1, "a")) // 6: the slow consumer's lag is 1

	hb := heartbeat.NewStore(l.KV)
	hb.Put(ctx, heartbeat.Beat{Host: "h1", HWM: 6, Head: 6})
	hb.Put(ctx, heartbeat.Beat{Host: "h2", HWM: 2, Head: 4})
	odd := "h\"3\\\n" // a label value the text format escapes
	hb.Put(ctx, heartbeat.Beat{Host: odd, HWM: 1, Head: 1})

	e, err := metrics.New(metrics.Config{Feed: l.Feed, Heartbeats: l.KV, Log: l.Log, Ledger: l.Name, MaxPartitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	r, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "metrics", Handler: e})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	rdone := make(chan error, 1)
	go func() { rdone <- r.Run(rctx) }()
	consumertest.Wait(t, 10*time.Second, "metrics consumer", func() bool { return r.Stats().Seq >= 6 })
	srv := httptest.NewServer(e.HTTPHandler())
	defer srv.Close()
	mfs := scrape(t, srv.URL+"/metrics")
	rcancel()
	if err := <-rdone; err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"syncledger_commits_total", nil, 5},
		{"syncledger_events_total", []string{"partition", "a"}, 2},
		{"syncledger_events_total", []string{"partition", "b"}, 2},
		{"syncledger_events_total", []string{"partition", "c"}, 1},
		{"syncledger_events_total", []string{"partition", metrics.OtherPartition}, 1},
		{"syncledger_bytes_total", nil, 100 + 100 + 50 + 7 + 1 + 1},
		{"syncledger_files_total", []string{"op", "write"}, 6},
		{"syncledger_files_total", []string{"op", "delete"}, 0},
		{"syncledger_last_commit_seq", nil, 6},
		{"syncledger_stream_head_seq", nil, 6},
		{"syncledger_stream_first_seq", nil, 1},
		{"syncledger_consumer_lag", []string{"consumer", "slow"}, 1},
		{"syncledger_consumer_ack_floor_seq", []string{"consumer", "slow"}, 5},
		{"syncledger_consumer_lag", []string{"consumer", "metrics"}, 0},
		{"syncledger_consumer_dead_letters", []string{"consumer", "metrics"}, 0},
		{"syncledger_host_hwm_seq", []string{"host", "h1"}, 6},
		{"syncledger_host_lag", []string{"host", "h1"}, 0},
		{"syncledger_host_hwm_seq", []string{"host", "h2"}, 2},
		{"syncledger_host_lag", []string{"host", "h2"}, 4},
		{"syncledger_host_hwm_seq", []string{"host", odd}, 1},
		{"syncledger_host_lag", []string{"host", odd}, 5},
		{"syncledger_collect_up", []string{"source", "stream"}, 1},
		{"syncledger_collect_up", []string{"source", "consumers"}, 1},
		{"syncledger_collect_up", []string{"source", "hosts"}, 1},
	} {
		got, ok := value(mfs, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if seen, ok := value(mfs, "syncledger_host_last_seen_timestamp_seconds", "host", "h2"); !ok || time.Since(time.Unix(int64(seen), 0)) > time.Minute {
		t.Errorf("h2 last seen %v (present %v), want about now", seen, ok)
	}
	if _, ok := value(mfs, "syncledger_last_commit_timestamp_seconds"); !ok {
		t.Error("no last commit timestamp")
	}
}

// TestScrapeBadHeartbeats is issue 38's point 6 at the metrics: a host
// credential puts a value that is no heartbeat, and another host's beat under
// a key of its own (which would make two series of one host: a failed
// scrape). Every good host's series stay, the read counts as up, and the bad
// rows are counted.
func TestScrapeBadHeartbeats(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "m")
	ctx := consumertest.Ctx(t)
	l.Append(t, l.Events(t, 1, "a"))
	hb := heartbeat.NewStore(l.KV)
	hb.Put(ctx, heartbeat.Beat{Host: "h1", HWM: 1, Head: 1})
	hb.Put(ctx, heartbeat.Beat{Host: "h2", HWM: 0, Head: 1})
	l.KV.Put(ctx, "garbage", []byte("not a heartbeat"))
	l.KV.Put(ctx, "h1-again", []byte(`{"host":"h1","hwm":99}`))

	e, err := metrics.New(metrics.Config{Feed: l.Feed, Heartbeats: l.KV, Log: l.Log, Ledger: l.Name})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.HTTPHandler())
	defer srv.Close()
	mfs := scrape(t, srv.URL+"/metrics")
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"syncledger_host_hwm_seq", []string{"host", "h1"}, 1},
		{"syncledger_host_hwm_seq", []string{"host", "h2"}, 0},
		{"syncledger_host_lag", []string{"host", "h2"}, 1},
		{"syncledger_hosts_skipped", nil, 2},
		{"syncledger_collect_up", []string{"source", "hosts"}, 1},
	} {
		if got, ok := value(mfs, tc.name, tc.labels...); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if n := len(mfs["syncledger_host_hwm_seq"].GetMetric()); n != 2 {
		t.Errorf("%d host series, want 2 (h1 once)", n)
	}
}

// TestScrapeServerFull: a server that refuses writes for lack of space is
// syncledger_server_full 1, with a full serve's free space and resume level.
func TestScrapeServerFull(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "m")
	full := ledger.ServerState{Full: true, Dir: "/srv", Free: 10, Reserve: 64, Resume: 96, Stored: 1000}
	e, err := metrics.New(metrics.Config{Feed: l.Feed, Heartbeats: l.KV, Log: l.Log, Ledger: l.Name,
		Server: func(context.Context) (ledger.ServerState, error) { return full, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.HTTPHandler())
	defer srv.Close()
	mfs := scrape(t, srv.URL+"/metrics")
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"syncledger_server_full", nil, 1},
		{"syncledger_server_stored_bytes", nil, 1000},
		{"syncledger_server_disk_free_bytes", nil, 10},
		{"syncledger_server_disk_resume_bytes", nil, 96},
		{"syncledger_collect_up", []string{"source", "server"}, 1},
	} {
		if got, ok := value(mfs, tc.name, tc.labels...); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	full = ledger.ServerState{Stored: 5}
	mfs = scrape(t, srv.URL+"/metrics")
	if got, ok := value(mfs, "syncledger_server_full"); !ok || got != 0 {
		t.Errorf("syncledger_server_full = %v (present %v) once the server takes writes, want 0", got, ok)
	}
	if _, ok := value(mfs, "syncledger_server_disk_free_bytes"); ok {
		t.Error("a free space series for a server that takes writes")
	}
}

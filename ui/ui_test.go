package ui

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/memledger"
)

type fixture struct {
	t     *testing.T
	log   *memledger.Log
	heads map[string]ledger.Record
}

func newFixture(t *testing.T) *fixture {
	l, err := memledger.New(ledger.Info{Name: "dash", Blobs: "file:///b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, log: l, heads: map[string]ledger.Record{}}
}

// commit appends one commit of the given paths by host, at time at.
func (f *fixture) commit(host string, at time.Time, paths ...string) {
	f.t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		f.t.Fatal(err)
	}
	byPart := map[string][]ledger.Entry{}
	var order []string
	for _, p := range paths {
		k := ledger.PartitionKey(p)
		if byPart[k] == nil {
			order = append(order, k)
		}
		byPart[k] = append(byPart[k], ledger.Entry{Path: p, SHA256: ledger.DigestOf([]byte(p)), Size: int64(len(p)), Mode: 0o644})
	}
	var evs []ledger.Event
	for i, k := range order {
		h := f.heads[k]
		evs = append(evs, ledger.Event{V: ledger.FormatVersion, Ledger: f.log.UUID(), Commit: id, Host: host, At: at,
			Partition: k, ModelSeq: h.Event.ModelSeq + 1, Prev: h.Seq, Parts: len(order), Part: i + 1, Entries: byPart[k]})
	}
	seqs, err := f.log.Append(f.t.Context(), evs)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, e := range evs {
		f.heads[e.Partition] = ledger.Record{Seq: seqs[i], Event: e}
	}
}

func waitState(t *testing.T, d *Dashboard, ok func(State) bool) State {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ch := d.Changed()
		st := d.State()
		if ok(st) {
			return st
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("state never matched: %+v", st)
		}
	}
}

func TestDashboardState(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	f.commit("a", now.Add(-10*time.Minute), "data/command/shell/vpc/result/1/raw")       // too old for the rate
	f.commit("a", now.Add(-3*time.Minute), "audit/1.json", "data/aws/ec2/vpc/x/state/1") // 2 partitions
	f.commit("b", now.Add(-10*time.Second), "data/command/shell/vpc/result/2/raw")

	hosts := func(context.Context) ([]Host, error) {
		return []Host{{Host: "b", HWM: 4, LastSeen: now}, {Host: "a", HWM: 2, LastSeen: now}}, nil
	}
	d, err := New(Config{Log: f.log, Ledger: "dash", Hosts: hosts, Recent: 2, MaxPartitions: 2, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = d.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()

	st := waitState(t, d, func(s State) bool { return s.CaughtUp && s.Read == 4 && len(s.Hosts) == 2 })
	if st.Head != 4 || st.First != 1 || st.UUID != f.log.UUID() || st.Error != "" {
		t.Errorf("state %+v", st)
	}
	if st.Rate.Last5Minutes != 2 || st.Rate.LastMinute != 1 || st.Rate.PerMinute != 0.4 {
		t.Errorf("rate %+v", st.Rate)
	}
	if len(st.Commits) != 2 || st.Commits[0].Seq != 4 || st.Commits[0].Host != "b" || st.Commits[1].Seq != 3 ||
		st.Commits[1].Files != 2 || len(st.Commits[1].Partitions) != 2 {
		t.Errorf("commits %+v", st.Commits)
	}
	if st.PartitionCount != 3 || len(st.Partitions) != 2 || st.Partitions[0].Seq != 4 || st.Partitions[0].ModelSeq != 2 {
		t.Errorf("partitions %d %+v", st.PartitionCount, st.Partitions)
	}
	if st.Hosts[0].Host != "a" || st.Hosts[0].Behind != 2 || st.Hosts[1].Behind != 0 {
		t.Errorf("hosts %+v", st.Hosts)
	}

	// A new commit arrives live.
	f.commit("a", time.Now(), "audit/2.json")
	st = waitState(t, d, func(s State) bool { return s.Head == 5 && s.Read == 5 })
	if st.Commits[0].Seq != 5 || st.Rate.LastMinute != 2 || st.Hosts[0].Behind != 3 {
		t.Errorf("after a live commit: %+v", st)
	}
}

func TestHandler(t *testing.T) {
	f := newFixture(t)
	f.commit("a", time.Now(), "audit/<script>alert(1)</script>.json")
	d, err := New(Config{Log: f.log, Ledger: "dash", MinInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = d.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	waitState(t, d, func(s State) bool { return s.Read == 1 })

	srv := httptest.NewServer(d.Handler(HandlerOptions{}))
	defer srv.Close()
	get := func(path, host string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		resp := get(path, "")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) < 100 {
			t.Errorf("GET %s: %d, %d bytes", path, resp.StatusCode, len(body))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://") {
			t.Errorf("GET %s refers to another site", path)
		}
	}
	// A page's script sets ledger data as text only.
	js := get("/app.js", "")
	b, _ := io.ReadAll(js.Body)
	js.Body.Close()
	if strings.Contains(string(b), "innerHTML") || strings.Contains(string(b), "insertAdjacentHTML") {
		t.Error("app.js writes HTML")
	}

	resp := get("/api/state", "")
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Read != 1 || len(st.Commits) != 1 {
		t.Errorf("/api/state: %+v %v", st, err)
	}
	resp.Body.Close()

	// DNS rebinding: another Host is refused unless the dashboard is public.
	if resp := get("/api/state", "evil.example:80"); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d", resp.StatusCode)
	}
	for _, h := range []string{"localhost:1", "[::1]:1", "127.0.0.1"} {
		if resp := get("/api/state", h); resp.StatusCode != 200 {
			t.Errorf("Host %s: %d", h, resp.StatusCode)
		}
	}
	pub := httptest.NewServer(d.Handler(HandlerOptions{Public: true}))
	defer pub.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, pub.URL+"/api/state", nil)
	req.Host = "dash.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("public dashboard: %v %v", resp, err)
	}

	// Server-sent events: the state at once, then on each change.
	ectx, ecancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer ecancel()
	req, _ = http.NewRequestWithContext(ectx, http.MethodGet, srv.URL+"/api/events", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("events content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	next := func() State {
		t.Helper()
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var st State
				if err := json.Unmarshal([]byte(data), &st); err != nil {
					t.Fatal(err)
				}
				return st
			}
		}
		t.Fatalf("events ended: %v", sc.Err())
		return State{}
	}
	if st := next(); st.Read != 1 {
		t.Errorf("first event: read %d", st.Read)
	}
	f.commit("b", time.Now(), "audit/next.json")
	for st := next(); st.Read != 2; st = next() {
	}
}

// TestDashboardAfterRetention: after retention the log keeps each partition's
// last event below the bound, with holes between; the dashboard reads from the
// floor and fetches the older heads by partition.
func TestDashboardAfterRetention(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	f.commit("a", now, "audit/1.json")                        // 1: audit's head until seq 5
	f.commit("a", now, "data/command/shell/vpc/result/1/raw") // 2
	f.commit("a", now, "data/command/shell/vpc/result/2/raw") // 3: vpc's head
	f.commit("b", now, "data/aws/ec2/vpc/x/state/1")          // 4: aws's head
	if _, err := f.log.TruncateBefore(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	f.commit("b", now, "audit/2.json") // 5
	if b, _ := f.log.Bounds(t.Context()); b.First != 1 {
		t.Fatalf("bounds %+v: want the old heads kept", b)
	}
	d, err := New(Config{Log: f.log, Ledger: "dash", Poll: 20 * time.Millisecond,
		Floor: func(context.Context) (ledger.Seq, error) { return 4, nil },
		Partitions: func(context.Context) ([]string, error) {
			return []string{"audit", "data--command--shell--vpc", "data--aws--ec2--vpc"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = d.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	st := waitState(t, d, func(s State) bool { return s.CaughtUp && s.PartitionCount == 3 })
	want := map[string][2]uint64{"audit": {2, 5}, "data--command--shell--vpc": {2, 3}, "data--aws--ec2--vpc": {1, 4}}
	for _, p := range st.Partitions {
		if w := want[p.Partition]; p.ModelSeq != w[0] || uint64(p.Seq) != w[1] {
			t.Errorf("partition %s: modelSeq %d seq %d, want %v", p.Partition, p.ModelSeq, p.Seq, w)
		}
	}
	if st.Error != "" || len(st.Commits) != 2 {
		t.Errorf("error %q, commits %+v", st.Error, st.Commits)
	}
}

// TestDashboardServerFull: a server whose disk is full is in the state (and
// leaves it once it takes writes again).
func TestDashboardServerFull(t *testing.T) {
	f := newFixture(t)
	var full atomic.Bool
	full.Store(true)
	server := func(context.Context) (ledger.ServerState, error) {
		if full.Load() {
			return ledger.ServerState{Full: true, Dir: "/srv", Free: 1, Reserve: 2, Resume: 3}, nil
		}
		return ledger.ServerState{Stored: 5}, nil
	}
	d, err := New(Config{Log: f.log, Ledger: "dash", Server: server, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = d.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	st := waitState(t, d, func(s State) bool { return s.Server != nil })
	if !st.Server.Full || st.Server.Dir != "/srv" || st.Server.Need() != 2 {
		t.Errorf("server %+v", st.Server)
	}
	full.Store(false)
	waitState(t, d, func(s State) bool { return s.Server != nil && !s.Server.Full })
}

// A lock's fence records and a fenced commit's checks (ledger.Fence) are no
// commits and head no partition: the dashboard shows the commits alone.
func TestDashboardSkipsFences(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	f.commit("a", now.Add(-time.Minute), "data/command/shell/vpc/result/1/raw")
	id, _ := ledger.NewCommitID(rand.Reader)
	fence, err := f.log.TakeFence(t.Context(), ledger.FenceRecord{V: ledger.FormatVersion, Ledger: f.log.UUID(), Lock: "data/command/shell/vpc/.lock", ID: id, Host: "b", At: now})
	if err != nil {
		t.Fatal(err)
	}
	h := f.heads["data--command--shell--vpc"]
	cid, _ := ledger.NewCommitID(rand.Reader)
	ev := ledger.Event{V: ledger.FormatVersion, Ledger: f.log.UUID(), Commit: cid, Host: "b", At: now, Partition: h.Event.Partition,
		ModelSeq: h.Event.ModelSeq + 1, Prev: h.Seq, Parts: 1, Part: 1,
		Entries: []ledger.Entry{{Path: "data/command/shell/vpc/result/2/raw", SHA256: ledger.DigestOf([]byte("2")), Size: 1, Mode: 0o644}}}
	if _, err := f.log.Append(t.Context(), []ledger.Event{ev}, ledger.Fence{Lock: "data/command/shell/vpc/.lock", Seq: fence}); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Log: f.log, Ledger: "dash", Hosts: func(context.Context) ([]Host, error) { return nil, nil }, Recent: 5, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = d.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	st := waitState(t, d, func(s State) bool { return s.CaughtUp && s.Read == 4 })
	if len(st.Commits) != 2 || st.Commits[0].Seq != 3 || st.Commits[1].Seq != 1 {
		t.Errorf("commits %+v, want seqs 3 and 1 (seq 2 a fence record, 4 a fence check)", st.Commits)
	}
	if st.PartitionCount != 1 || len(st.Partitions) != 1 || st.Partitions[0].Partition != "data--command--shell--vpc" || st.Partitions[0].Seq != 3 {
		t.Errorf("partitions %d %+v, want vpc's alone, at seq 3", st.PartitionCount, st.Partitions)
	}
}

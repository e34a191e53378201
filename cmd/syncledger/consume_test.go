package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/projector/host"
)

// serverLedger is a consumertest ledger on a nats-server of its own: the
// command's tests run the binary against it.
type serverLedger struct {
	*consumertest.Ledger
	Server *natsjstest.Server
	Conn   *nats.Conn
}

// newServerLedger starts a server and creates the ledger name on it.
func newServerLedger(t *testing.T, name string) *serverLedger {
	t.Helper()
	s, nc := natsjstest.RunServer(t)
	log, err := natsjs.CreateLog(consumertest.Ctx(t), nc, natsjs.LedgerConfig{Name: name, Blobs: "file://" + t.TempDir()})
	if err != nil {
		t.Fatalf("create ledger: %v", err)
	}
	feed, err := natsjs.NewFeed(nc, name)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := natsjs.HeartbeatKV(nc, name)
	if err != nil {
		t.Fatal(err)
	}
	return &serverLedger{Ledger: consumertest.On(log, feed, kv, name, log.UUID()), Server: s, Conn: nc}
}

// URL returns the server's client URL.
func (l *serverLedger) URL() string { return l.Server.ClientURL() }

// consumeEnv points the binary at l.
func consumeEnv(l *serverLedger) []string {
	return cliEnv("SYNCLEDGER_NATS="+l.URL(), "SYNCLEDGER_LEDGER="+l.Name, "SYNCLEDGER_LOG_LEVEL=warn", "SYNCLEDGER_HOST=test")
}

// auditSeqs reads the seqs of an audit file's complete lines (a consumer may be
// writing the last one).
func auditSeqs(t *testing.T, path string) []ledger.Seq {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []ledger.Seq
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var s consumers.Summary
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, s.Seq)
	}
	return out
}

// TestConsumeAuditSurvivesKill9 appends commits while `consume audit` processes
// are killed with SIGKILL mid-stream and restarted: the file ends up with every
// commit exactly once, in seq order.
func TestConsumeAuditSurvivesKill9(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	env := consumeEnv(l)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const commits = 600
	parts := [][]string{{"a"}, {"a", "b"}, {"c"}, {"b", "c", "d"}, {"d"}}

	var (
		mu   sync.Mutex
		want []ledger.Seq
	)
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for i := range commits {
			seqs := l.Commit(t, parts[i%len(parts)]...)
			mu.Lock()
			want = append(want, seqs[len(seqs)-1])
			mu.Unlock()
			if i%10 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()

	lines := func() int { return len(auditSeqs(t, path)) }
	for _, killAt := range []int{40, 150, 300} {
		p := startProc(t, env, "consume", "audit", "--file", path)
		consumertest.Wait(t, 30*time.Second, fmt.Sprintf("%d audit lines", killAt), func() bool { return lines() >= killAt })
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
	}
	<-appended
	p := startProc(t, env, "consume", "audit", "--file", path)
	mu.Lock()
	last := want[len(want)-1]
	mu.Unlock()
	consumertest.Wait(t, 30*time.Second, "every commit audited", func() bool {
		s := auditSeqs(t, path)
		return len(s) > 0 && s[len(s)-1] == last
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("consume audit exited %d on SIGTERM; stderr:\n%s", code, p.stderr)
	}
	if diff := cmp.Diff(want, auditSeqs(t, path)); diff != "" {
		t.Errorf("audit file is not every commit once in seq order (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(path); len(b) == 0 || b[len(b)-1] != '\n' {
		t.Error("audit file does not end with a complete line")
	}

	// The consumer's position is visible.
	r := cli(t, env, "consume", "status", "--json")
	var ps []consumers.Position
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil || r.code != 0 {
		t.Fatalf("consume status: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if len(ps) != 1 || ps[0].Name != "audit" || ps[0].AckFloor != last || ps[0].Lag != 0 {
		t.Errorf("consume status = %+v, want audit acknowledged up to %d", ps, last)
	}
}

func TestConsumeMetricsAndDeadLettersCLI(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	env := consumeEnv(l)
	l.Commit(t, "a", "b")
	l.Commit(t, "b")
	p := startProc(t, env, "consume", "metrics", "--listen", "127.0.0.1:0", "--start", "all")
	url := regexp.MustCompile(`http://\S+/metrics`).FindString(p.line(t, `^metrics on http://`))
	var families map[string]bool
	consumertest.Wait(t, 20*time.Second, "commits counted", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("parse metrics: %v", err)
		}
		families = map[string]bool{}
		for name := range mfs {
			families[name] = true
		}
		mf := mfs["syncledger_commits_total"]
		return mf != nil && mf.GetMetric()[0].GetCounter().GetValue() == 2
	})
	for _, name := range []string{"syncledger_events_total", "syncledger_stream_head_seq", "syncledger_consumer_lag"} {
		if !families[name] {
			t.Errorf("no %s in the scrape", name)
		}
	}
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("consume metrics exited %d; stderr:\n%s", code, p.stderr)
	}

	// A webhook whose endpoint refuses everything dead-letters the commits.
	srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })}
	hl := listenLoopback(t)
	go func() { _ = srv.Serve(hl) }()
	t.Cleanup(func() { srv.Close() })
	wp := startProc(t, append(env, "SYNCLEDGER_WEBHOOK_SECRET=s"), "consume", "webhook", "--url", "http://"+hl.Addr().String()+"/", "--start", "all")
	consumertest.Wait(t, 20*time.Second, "two dead letters", func() bool {
		r := cli(t, env, "consume", "dead-letters", "webhook", "--json")
		return strings.Count(r.stdout, "\n") == 2
	})
	wp.stop(t, syscall.SIGTERM)
	r := cli(t, env, "consume", "dead-letters")
	if r.code != 0 || !strings.Contains(r.stdout, "webhook answered 403 Forbidden") {
		t.Errorf("dead-letters: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, env, "consume", "delete", "webhook"); r.code != 0 {
		t.Errorf("consume delete: exit %d: %s", r.code, r.stderr)
	}
	r = cli(t, env, "consume", "status")
	if !strings.Contains(r.stdout, "metrics") || strings.Contains(r.stdout, "webhook") {
		t.Errorf("consume status after delete:\n%s", r.stdout)
	}
	if r := cli(t, env, "consume", "webhook", "--url", "http://x/"); r.code != 2 {
		t.Errorf("webhook without a secret: exit %d, want 2", r.code)
	}
}

func TestHostsCLI(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	env := consumeEnv(l)
	ctx := consumertest.Ctx(t)
	if r := cli(t, env, "hosts"); r.code != 0 || !strings.Contains(r.stdout, "no host") {
		t.Errorf("hosts with no heartbeat: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var seqs []ledger.Seq
	for range 5 {
		seqs = append(seqs, l.Commit(t, "a")...)
	}
	// Two hosts, as sync and watch record them: one at the head, one 3 behind.
	if err := heartbeat.NewStore(l.KV).Put(ctx, heartbeat.Beat{Host: "web-1", HWM: seqs[4], Head: seqs[4], Command: "watch", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := heartbeat.NewStore(l.KV).Put(ctx, heartbeat.Beat{Host: "web-2", HWM: seqs[1], Head: seqs[2], Command: "sync"}); err != nil {
		t.Fatal(err)
	}
	r := cli(t, env, "hosts", "--json")
	var out struct {
		Head  ledger.Seq `json:"head"`
		Hosts []hostRow  `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("hosts --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	type row struct {
		Host         string
		HWM          ledger.Seq
		Behind       uint64
		HeadSeen     ledger.Seq
		RecentlySeen bool
	}
	var got []row
	for _, h := range out.Hosts {
		got = append(got, row{h.Host, h.HWM, h.Behind, h.HeadSeen, time.Since(h.LastSeen) < time.Minute})
	}
	want := []row{{"web-1", 5, 0, 5, true}, {"web-2", 2, 3, 3, true}}
	if diff := cmp.Diff(want, got); diff != "" || out.Head != 5 {
		t.Errorf("hosts (head %d, want 5) (-want +got):\n%s", out.Head, diff)
	}
	r = cli(t, env, "hosts")
	if !regexp.MustCompile(`(?m)^web-2\s+2\s+3\s+\d+s ago\s+sync`).MatchString(r.stdout) {
		t.Errorf("hosts table:\n%s", r.stdout)
	}
	if r := cli(t, env, "hosts", "forget", "web-2"); r.code != 0 {
		t.Errorf("hosts forget: exit %d: %s", r.code, r.stderr)
	}
	if r := cli(t, env, "hosts"); strings.Contains(r.stdout, "web-2") {
		t.Errorf("web-2 still listed:\n%s", r.stdout)
	}
}

func TestTailCLI(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	env := consumeEnv(l)
	model := ledger.PartitionKeysForModel("command/shell", "vpc")
	c1 := l.Commit(t, "a", model[0])
	all := startProc(t, env, "tail", "--json", "--from", "1")
	filtered := startProc(t, env, "tail", "--model", "command/shell:vpc", "--from", "1")
	_ = l.Commit(t, "a")
	c3 := l.Commit(t, model[0], "b", model[1])

	var got []consumers.Summary
	for range 3 {
		var s consumers.Summary
		if err := json.Unmarshal([]byte(all.line(t, `^\{`)), &s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if got[0].Seq != c1[1] || !slices.Equal(got[0].Partitions, []string{"a", model[0]}) || got[2].Seq != c3[2] || got[2].Parts != 3 {
		t.Errorf("tail --json: %+v", got)
	}
	first := filtered.line(t, `^\s*\d+ `)
	second := filtered.line(t, `^\s*\d+ `)
	if !strings.HasPrefix(strings.TrimSpace(first), fmt.Sprint(c1[1])) || !strings.Contains(first, model[0]+" (1 of 2)") ||
		!strings.HasPrefix(strings.TrimSpace(second), fmt.Sprint(c3[2])) || !strings.Contains(second, model[0]+","+model[1]+" (2 of 3)") {
		t.Errorf("tail --model:\n%s\n%s", first, second)
	}
	if code := all.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("tail exited %d", code)
	}
	filtered.kill()
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestHeartbeatHelpers checks the calls sync/exec (app.beat) and watch
// (app.beatReporter) make, in-process.
func TestHeartbeatHelpers(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	ctx := consumertest.Ctx(t)
	a := newApp(io.Discard, io.Discard, func(string) string { return "" })
	defer a.close()
	a.natsURL, a.ledgerName, a.host, a.cache = l.URL(), l.Name, "w1", t.TempDir()
	h, err := a.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put(t, a.cache, "audit/x", "hello")
	if _, err := h.Commit(ctx, host.CommitOptions{Message: "m"}); err != nil {
		t.Fatal(err)
	}
	l.Commit(t, "b") // another host's commit: w1 is 1 behind
	s := heartbeat.NewStore(l.KV)
	beatOf := func(host string) heartbeat.Beat {
		bs, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Host == host {
				return b
			}
		}
		return heartbeat.Beat{}
	}

	rep := a.beatReporter(ctx, "watch", h)
	if rep == nil {
		t.Fatal("no reporter")
	}
	consumertest.Wait(t, 5*time.Second, "watch beat", func() bool {
		b := beatOf("w1")
		return b.HWM == 1 && b.Head == 2 && b.Command == "watch"
	})

	a.host = "s1"
	a.beat(ctx, "sync", 2, 2)
	first := beatOf("s1")
	if first.HWM != 2 || first.Command != "sync" || first.Version == "" {
		t.Errorf("sync beat = %+v", first)
	}
	// The same beat again within beatQuiet is not sent (the cache remembers
	// it); a changed one is, and so is the same one once beatQuiet passed.
	seenAfter := func(what string, want bool) heartbeat.Beat {
		t.Helper()
		time.Sleep(20 * time.Millisecond) // Seen is the server's time: let it move
		b := beatOf("s1")
		if sent := b.Seen.After(first.Seen); sent != want {
			t.Errorf("%s: sent %v, want %v (%+v)", what, sent, want, b)
		}
		return b
	}
	a.beat(ctx, "sync", 2, 2)
	seenAfter("the same beat at once", false)
	a.beat(ctx, "sync", 2, 3)
	first = seenAfter("a changed head", true)
	lb := filepath.Join(a.cache, ledger.StateDir, lastBeatFile)
	old := time.Now().Add(-beatQuiet)
	data, err := json.Marshal(lastBeat{Ledger: a.ledgerName, Beat: heartbeat.Beat{Host: "s1", HWM: 2, Head: 3, Version: shortVersion(), Command: "sync"}, At: old})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lb, data, 0o644); err != nil {
		t.Fatal(err)
	}
	a.beat(ctx, "sync", 2, 3)
	seenAfter("the same beat after beatQuiet", true)
}

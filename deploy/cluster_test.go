// Package deploy_test checks the deployment files: docker-compose.yml and the NATS
// cluster configuration in deploy/nats, which TestCluster runs on loopback with
// real nats-server processes.
package deploy_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/testtool"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// clusterEnv gates TestCluster. When it is set, the test must run: any obstacle
// is a failure, never a skip.
const clusterEnv = "SYNCLEDGER_TEST_CLUSTER"

// buildNATSServer returns the nats-server at the version go.mod requires (the
// module's tool, internal/testtool).
func buildNATSServer(t *testing.T) string {
	t.Helper()
	bin, err := testtool.Path(natsjstest.Tool)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// freePorts returns n distinct free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

type node struct {
	name    string
	url     string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func (n *node) stop(t *testing.T) {
	t.Helper()
	if n.cmd.Process == nil {
		return
	}
	select {
	case <-n.done:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
		t.Errorf("%s did not stop on SIGTERM", n.name)
	}
}

// startCluster runs deploy/nats/n1.conf … n3.conf on loopback, passing the
// addresses the files read from the environment.
func startCluster(t *testing.T, bin string) []*node {
	t.Helper()
	ports := freePorts(t, 9) // client, cluster, http × 3
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
	}
	confDir, err := filepath.Abs("nats")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		dir := t.TempDir()
		n := &node{
			name:    name,
			url:     fmt.Sprintf("nats://127.0.0.1:%d", ports[i]),
			logPath: filepath.Join(dir, name+".log"),
			done:    make(chan struct{}),
		}
		logf, err := os.Create(n.logPath)
		if err != nil {
			t.Fatal(err)
		}
		n.cmd = exec.Command(bin, "-c", filepath.Join(confDir, name+".conf"))
		n.cmd.Stdout, n.cmd.Stderr = logf, logf
		n.cmd.Env = append(os.Environ(),
			fmt.Sprintf("NATS_LISTEN=127.0.0.1:%d", ports[i]),
			fmt.Sprintf("NATS_CLUSTER_LISTEN=127.0.0.1:%d", ports[3+i]),
			fmt.Sprintf("NATS_HTTP=127.0.0.1:%d", ports[6+i]),
			"NATS_ROUTES=["+strings.Join(routes, ", ")+"]",
			"NATS_STORE_DIR="+filepath.Join(dir, "store"),
		)
		if err := n.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		go func() {
			_ = n.cmd.Wait()
			logf.Close()
			close(n.done)
		}()
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop(t)
		}
		if t.Failed() {
			for _, n := range nodes {
				b, _ := os.ReadFile(n.logPath)
				t.Logf("--- %s log (last 4 KiB) ---\n%s", n.name, tail(b, 4096))
			}
		}
	})
	return nodes
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitMetaLeader waits until JetStream answers account requests, which needs a
// meta leader elected by the cluster.
func waitMetaLeader(t *testing.T, ctx context.Context, nc *nats.Conn, nodes []*node) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for {
		for _, n := range nodes {
			select {
			case <-n.done:
				t.Fatalf("%s exited during start-up", n.name)
			default:
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(rctx)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no JetStream meta leader: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func entry(path, content string) ledger.Entry {
	return ledger.Entry{Path: path, SHA256: ledger.DigestOf([]byte(content)), Size: int64(len(content)), Mode: 0o644}
}

// commitEvents builds one commit's events: entries grouped by partition, each
// extending the partition's chain as heads records it.
func commitEvents(t *testing.T, uuid, host string, heads map[string]ledger.Record, entries ...ledger.Entry) []ledger.Event {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	byPart := map[string][]ledger.Entry{}
	var order []string
	for _, e := range entries {
		p := ledger.PartitionKey(e.Path)
		if byPart[p] == nil {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], e)
	}
	var evs []ledger.Event
	for i, p := range order {
		h := heads[p]
		evs = append(evs, ledger.Event{
			V: ledger.FormatVersion, Ledger: uuid, Commit: id, Host: host, At: time.Now().UTC(),
			Message: "cluster test", Partition: p, ModelSeq: h.Event.ModelSeq + 1, Prev: h.Seq,
			Parts: len(order), Part: i + 1, Entries: byPart[p],
		})
	}
	return evs
}

func appendCommit(t *testing.T, ctx context.Context, l ledger.CommitLog, heads map[string]ledger.Record, evs []ledger.Event) []ledger.Seq {
	t.Helper()
	seqs, err := l.Append(ctx, evs)
	if err != nil {
		t.Fatalf("append commit over %d partitions: %v", len(evs), err)
	}
	if len(seqs) != len(evs) {
		t.Fatalf("append: %d seqs for %d events", len(seqs), len(evs))
	}
	for i, e := range evs {
		heads[e.Partition] = ledger.Record{Seq: seqs[i], Event: e}
		if i > 0 && seqs[i] != seqs[i-1]+1 {
			t.Errorf("commit seqs %v not consecutive", seqs)
		}
	}
	return seqs
}

func TestCluster(t *testing.T) {
	if os.Getenv(clusterEnv) == "" {
		t.Skipf("set %s=1 to run: builds nats-server from the module cache, runs deploy/nats/n{1,2,3}.conf as a loopback cluster and commits to an R3 ledger", clusterEnv)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	bin := buildNATSServer(t)
	nodes := startCluster(t, bin)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitCtx, waitCancel := context.WithTimeout(ctx, 60*time.Second)
	waitMetaLeader(t, waitCtx, nc, nodes)
	waitCancel()

	l, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "cluster", Blobs: "file:///nonexistent/blobs", Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 ledger: %v", err)
	}
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Replicas != 3 || info.Name != "cluster" || ledger.ValidateUUID(info.UUID) != nil {
		t.Fatalf("ledger info %+v, want 3 replicas", info)
	}
	// Create is idempotent on the cluster too.
	l2, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "cluster", Replicas: 3})
	if err != nil {
		t.Fatalf("second create: %v", err)
	}
	if l2.UUID() != info.UUID {
		t.Fatalf("second create: uuid %s, want %s", l2.UUID(), info.UUID)
	}

	heads := map[string]ledger.Record{}
	vpc := "data/aws/ec2/vpc/abc/state/1/raw"
	var want []ledger.Event
	add := func(evs []ledger.Event) {
		appendCommit(t, ctx, l, heads, evs)
		want = append(want, evs...)
	}
	add(commitEvents(t, info.UUID, "host-a", heads, entry(vpc, "v1")))
	// One commit over three partitions: one atomic batch.
	add(commitEvents(t, info.UUID, "host-b", heads,
		entry("data/command/shell/x1/state/1/raw", "x"),
		entry("audit/2026/01/run.json", "{}"),
		entry("data/aws/ec2/vpc/abc/state/2/raw", "v2")))
	add(commitEvents(t, info.UUID, "host-a", heads, ledger.Entry{Path: vpc, Deleted: true}))

	// A stale chain link is refused and stores nothing.
	stale := commitEvents(t, info.UUID, "host-c", map[string]ledger.Record{}, entry(vpc, "stale"))
	if _, err := l.Append(ctx, stale); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("stale append: %v, want ErrConflict", err)
	}

	// One node down: the other two still form a quorum for the R3 stream. The
	// node may have led the stream (and held this client's connection), so the
	// first attempt may end with its outcome unknown while a new leader is
	// elected; the documented answer is to append the same events again, which
	// stores them once.
	nodes[2].stop(t)
	evs := commitEvents(t, info.UUID, "host-b", heads, entry("audit/2026/01/run2.json", "{}"))
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		seqs, err := l.Append(actx, evs)
		acancel()
		if err == nil {
			heads[evs[0].Partition] = ledger.Record{Seq: seqs[0], Event: evs[0]}
			want = append(want, evs...)
			break
		}
		if !errors.Is(err, natsjs.ErrOutcomeUnknown) || time.Now().After(deadline) {
			t.Fatalf("append with one node down, attempt %d: %v", attempt, err)
		}
		t.Logf("append with one node down, attempt %d: %v", attempt, err)
	}

	var got []ledger.Record
	if err := l.Read(ctx, 1, 0, func(r ledger.Record) error {
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Seq != ledger.Seq(i+1) || r.Event.Commit != w.Commit || r.Event.Partition != w.Partition ||
			r.Event.ModelSeq != w.ModelSeq || r.Event.Prev != w.Prev || len(r.Event.Entries) != len(w.Entries) {
			t.Errorf("event %d: got seq %d %s %s modelSeq %d prev %d, want %s %s modelSeq %d prev %d",
				i, r.Seq, r.Event.Commit, r.Event.Partition, r.Event.ModelSeq, r.Event.Prev,
				w.Commit, w.Partition, w.ModelSeq, w.Prev)
		}
	}
	vpcKey := ledger.PartitionKey(vpc)
	if last, err := l.PartitionLastSeq(ctx, vpcKey); err != nil || last != heads[vpcKey].Seq {
		t.Errorf("partition %s last seq %d (%v), want %d", vpcKey, last, err, heads[vpcKey].Seq)
	}
}

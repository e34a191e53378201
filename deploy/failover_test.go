package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
)

// foNode is one nats-server process of the failover cluster, restartable
// with the same configuration, ports and store.
type foNode struct {
	name, url string
	args, env []string
	logPath   string
	cmd       *exec.Cmd
	done      chan struct{}
}

func (n *foNode) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin, n.args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.Env = n.env
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", n.name, err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}(n.cmd, n.done)
}

// kill sends SIGKILL and waits for the process to end.
func (n *foNode) kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// startFailoverCluster runs deploy/nats/n{1,2,3}.conf on loopback, as
// startCluster does, with nodes that can be killed and restarted.
func startFailoverCluster(t *testing.T, bin string) []*foNode {
	t.Helper()
	ports := freePorts(t, 9)
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
	}
	confDir, err := filepath.Abs("nats")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*foNode
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		dir := t.TempDir()
		n := &foNode{
			name: name, url: fmt.Sprintf("nats://127.0.0.1:%d", ports[i]),
			args:    []string{"-c", filepath.Join(confDir, name+".conf")},
			logPath: filepath.Join(dir, name+".log"),
			env: append(os.Environ(),
				fmt.Sprintf("NATS_LISTEN=127.0.0.1:%d", ports[i]),
				fmt.Sprintf("NATS_CLUSTER_LISTEN=127.0.0.1:%d", ports[3+i]),
				fmt.Sprintf("NATS_HTTP=127.0.0.1:%d", ports[6+i]),
				"NATS_ROUTES=["+strings.Join(routes, ", ")+"]",
				"NATS_STORE_DIR="+filepath.Join(dir, "store"),
			),
		}
		n.start(t, bin)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill()
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

func connectAll(t *testing.T, nodes []*foNode, first int) *nats.Conn {
	t.Helper()
	var urls []string
	for i := range nodes {
		urls = append(urls, nodes[(first+i)%len(nodes)].url)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// streamLeader returns the name of the node leading the ledger's stream.
func streamLeader(ctx context.Context, nc *nats.Conn, stream string) (string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	if s.CachedInfo().Cluster == nil || s.CachedInfo().Cluster.Leader == "" {
		return "", errors.New("no leader")
	}
	return s.CachedInfo().Cluster.Leader, nil
}

// acked is a commit a committer saw acknowledged.
type acked struct {
	id   string
	seqs []ledger.Seq
}

// TestClusterFailover runs 8 concurrent committers, each a projector/host on
// its own cache and connection, against an R3 ledger on three real
// nats-server processes (deploy/nats), kills the stream leader with SIGKILL
// mid-run and restarts it later. Three kill points, each on a fresh cluster:
// after 20%, 50% and 80% of the commits. Every commit a client saw
// acknowledged is in the stream exactly once, at the seqs it was told; no
// commit is stored twice; every partition's chain is unbroken; every host,
// and a new one, converges to the same cache.
func TestClusterFailover(t *testing.T) {
	if os.Getenv(clusterEnv) == "" {
		t.Skipf("set %s=1 to run: builds nats-server, runs deploy/nats as a loopback cluster, kills the stream leader under 8 committers", clusterEnv)
	}
	bin := buildNATSServer(t)
	for _, killAt := range []float64{0.2, 0.5, 0.8} {
		t.Run(fmt.Sprintf("kill leader at %.0f%%", 100*killAt), func(t *testing.T) {
			failover(t, bin, killAt)
		})
	}
}

func failover(t *testing.T, bin string, killAt float64) {
	const (
		committers = 8
		rounds     = 12
	)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	nodes := startFailoverCluster(t, bin)
	admin := connectAll(t, nodes, 0)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(rctx)
		rcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no JetStream meta leader: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	opts := []natsjs.Option{natsjs.WithTimeout(2 * time.Second), natsjs.WithRetry(10, 100*time.Millisecond)}
	lg, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: "failover", Blobs: "file:///unused", Replicas: 3}, opts...)
	if err != nil {
		t.Fatalf("create R3 ledger: %v", err)
	}
	objs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	blobs := ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	openHost := func(name string, nc *nats.Conn) *host.Host {
		l, err := natsjs.OpenLog(ctx, nc, "failover", opts...)
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.Open(host.Config{Cache: t.TempDir(), Host: name, Log: l, Blobs: blobs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}

	var (
		mu       sync.Mutex
		acks     []acked
		failures []string
		done     atomic.Int64
		hosts    = make([]*host.Host, committers)
		killOnce sync.Once
		killed   = make(chan string, 1)
	)
	total := committers * rounds
	for i := range hosts {
		hosts[i] = openHost(fmt.Sprintf("c%d", i), connectAll(t, nodes, i%3))
	}
	kill := func() {
		leader, err := streamLeader(ctx, admin, lg.Stream())
		if err != nil {
			t.Errorf("find the stream leader: %v", err)
			killed <- ""
			return
		}
		for _, n := range nodes {
			if n.name == leader {
				n.kill()
				t.Logf("killed stream leader %s (SIGKILL) after %d commits", leader, done.Load())
			}
		}
		killed <- leader
	}
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			for r := range rounds {
				dir := h.Dir().Root()
				files := map[string]string{
					fmt.Sprintf("data/fo/c%d/m%d/1/raw", i, r%3): fmt.Sprintf("c%d r%d", i, r),
					fmt.Sprintf("audit/c%d/r%d.log", i, r):       "shared partition",
				}
				if r%4 == 3 {
					files[fmt.Sprintf("outputs/fo/c%d/x/1/raw", i)] = fmt.Sprint(r)
				}
				for rel, content := range files {
					p := filepath.Join(dir, filepath.FromSlash(rel))
					err := os.MkdirAll(filepath.Dir(p), 0o755)
					if err == nil {
						err = os.WriteFile(p, []byte(content), 0o644)
					}
					if err != nil {
						t.Errorf("c%d round %d: write %s: %v", i, r, rel, err)
						return
					}
				}
				deadline := time.Now().Add(90 * time.Second)
				for {
					cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
					res, err := h.Commit(cctx, host.CommitOptions{Message: fmt.Sprintf("c%d r%d", i, r)})
					ccancel()
					if err == nil {
						if !res.Nothing {
							mu.Lock()
							acks = append(acks, acked{res.Commit, res.Seqs})
							mu.Unlock()
						}
						break
					}
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					if time.Now().After(deadline) || ctx.Err() != nil {
						t.Errorf("c%d round %d: commit still failing: %v", i, r, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				if n := done.Add(1); float64(n) >= killAt*float64(total) {
					killOnce.Do(func() { go kill() })
				}
			}
		})
	}
	leader := <-killed
	time.Sleep(3 * time.Second) // the cluster runs on two nodes for a while
	for _, n := range nodes {
		if n.name == leader {
			n.start(t, bin)
			t.Logf("restarted %s", leader)
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Every host, and a new one, syncs; all converge.
	fresh := openHost("fresh", connectAll(t, nodes, 2))
	all := append(slices.Clone(hosts), fresh)
	for _, h := range all {
		for attempt := 1; ; attempt++ {
			sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := h.Sync(sctx, host.SyncOptions{})
			scancel()
			if err == nil {
				break
			}
			if attempt == 20 {
				t.Fatalf("final sync: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	want := tree(t, fresh.Dir().Root())
	for i, h := range hosts {
		if diff := cmp.Diff(want, tree(t, h.Dir().Root())); diff != "" {
			t.Errorf("c%d differs from a new host (-new +c%d):\n%s", i, i, diff)
		}
	}
	for i := range committers {
		for r := range rounds {
			rel := fmt.Sprintf("audit/c%d/r%d.log", i, r)
			if want[rel] != "shared partition" {
				t.Errorf("%s missing from the converged caches", rel)
			}
		}
	}

	// The log: commits once each, acknowledged ones where the client was told,
	// chains unbroken.
	bySeq := map[ledger.Seq]ledger.Record{}
	commits := map[string][]ledger.Seq{}
	heads := map[string]ledger.Record{}
	if err := lg.Read(ctx, 1, 0, func(r ledger.Record) error {
		bySeq[r.Seq] = r
		commits[r.Event.Commit] = append(commits[r.Event.Commit], r.Seq)
		h, ok := heads[r.Event.Partition]
		if ok && (r.Event.Prev != h.Seq || r.Event.ModelSeq != h.Event.ModelSeq+1) || !ok && (r.Event.ModelSeq != 1 || r.Event.Prev != 0) {
			return fmt.Errorf("chain of %s broken at seq %d (modelSeq %d prev %d)", r.Event.Partition, r.Seq, r.Event.ModelSeq, r.Event.Prev)
		}
		heads[r.Event.Partition] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for id, seqs := range commits {
		first := bySeq[seqs[0]].Event
		if len(seqs) != first.Parts {
			t.Errorf("commit %s stored %d times over its %d parts: seqs %v", id, len(seqs)/max(first.Parts, 1), first.Parts, seqs)
		}
	}
	for _, a := range acks {
		if got := commits[a.id]; !slices.Equal(got, a.seqs) {
			t.Errorf("acknowledged commit %s at seqs %v, the stream has it at %v", a.id, a.seqs, got)
		}
	}
	t.Logf("%d commits acknowledged, %d in the stream, %d events; %d failed commit attempts (retried); leader %s killed",
		len(acks), len(commits), len(bySeq), len(failures), leader)
	if len(failures) > 0 {
		t.Logf("first failure: %s", failures[0])
	}
}

// tree returns a cache's synced files with their content.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel == ledger.StateDir {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package deploy_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/projector"
)

// TestRegionsConfigs runs deploy/regions' two files as they are (real
// nats-server processes): the origin, and region B's server joined to it by
// a leaf node. The admin makes the mirror there (CreateMirror, as `mirror
// create`); a commit at the origin is read through it, its head the
// mirror's.
func TestRegionsConfigs(t *testing.T) {
	bin := buildNATSServer(t)
	ports := freePorts(t, 5) // origin client, http, leaf; region B client, http
	leaf := fmt.Sprintf("127.0.0.1:%d", ports[2])
	origin := startConf(t, bin, "origin", ports[0], "NATS_HTTP="+fmt.Sprintf("127.0.0.1:%d", ports[1]), "NATS_LEAF_LISTEN="+leaf)
	regionB := startConf(t, bin, "region-b", ports[3], "NATS_HTTP="+fmt.Sprintf("127.0.0.1:%d", ports[4]), "NATS_ORIGIN_LEAF="+fmt.Sprintf("%q", "nats-leaf://"+leaf))

	ctx := t.Context()
	nc := natsjstest.Connect(t, regionB.url)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := nc.Request("$JS.hub.API.INFO", nil, time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("region B's leaf node did not reach the origin")
		}
		time.Sleep(25 * time.Millisecond)
	}
	onc := natsjstest.Connect(t, origin.url)
	lg, err := natsjs.CreateLog(ctx, onc, natsjs.LedgerConfig{Name: "prod", Blobs: "file:///unused"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: origin.url}, Read: natsjs.Endpoint{URL: regionB.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.CreateMirror(ctx, "prod", 1)
	if err != nil || !res.Created || res.Domain != "eu" || res.OriginDomain != "hub" {
		t.Fatalf("CreateMirror on deploy/regions: %+v, %v", res, err)
	}
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := projector.CommitEvents(lg.UUID(), func(string) projector.Mark { return projector.Mark{} },
		ledger.Commit{ID: id, Host: "h", At: time.Now(), Message: "one", Entries: []ledger.Entry{{Path: "data/m/1", SHA256: ledger.DigestOf([]byte("one")), Size: 3, Mode: 0o644}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	b, err := c.Ledger("prod").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for {
		h, ok, err := b.MirrorHead(ctx)
		if err == nil && ok && h.Seq >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror did not copy the commit: %+v, %v, %v", h, ok, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	h, err := b.Head(ctx, ledger.HeadRequest{Commit: true})
	if err != nil || h.Seq != 1 || h.FromOrigin() || h.Commit != evs[0].Commit {
		t.Fatalf("region B's head: %+v, %v; want seq 1, the mirror's", h, err)
	}
	t.Logf("region B's head: %s", h)
}

// startConf runs deploy/regions/NAME.conf on loopback, its client port
// port, with the other settings the file reads from env, and waits until it
// takes clients.
func startConf(t *testing.T, bin, name string, port int, env ...string) *node {
	t.Helper()
	dir := t.TempDir()
	conf, err := filepath.Abs(filepath.Join("regions", name+".conf"))
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, url: fmt.Sprintf("nats://127.0.0.1:%d", port), logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(bin, "-c", conf)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.Env = append(append(os.Environ(), fmt.Sprintf("NATS_LISTEN=127.0.0.1:%d", port), "NATS_STORE_DIR="+filepath.Join(dir, "store")), env...)
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = n.cmd.Wait()
		logf.Close()
		close(n.done)
	}()
	t.Cleanup(func() {
		n.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(n.logPath)
			t.Logf("--- %s log (last 4 KiB) ---\n%s", n.name, tail(b, 4096))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(n.url)
		if err == nil {
			nc.Close()
			return n
		}
		select {
		case <-n.done:
			b, _ := os.ReadFile(n.logPath)
			t.Fatalf("%s exited: %s", name, tail(b, 4096))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not take clients: %v", name, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

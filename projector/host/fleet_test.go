package host

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// fleetHosts is how many hosts TestFleetWatchHoldsNoConsumer runs (issue 40
// asks for 200 watching).
const fleetHosts = 200

// TestFleetWatchHoldsNoConsumer: 200 hosts, each on a connection of its own
// to one server, watch the ledger; every commit reaches every one of them,
// and the server holds no consumer for any of them — while they watch, and
// after half of them are killed (their connections dropped, as a killed
// process's are) and the rest stopped.
func TestFleetWatchHoldsNoConsumer(t *testing.T) {
	t.Parallel()
	srv, admin := natsjstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: "fleet", Blobs: "file:///unused"}); err != nil {
		t.Fatal(err)
	}
	objs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	blobs := ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func(when string) int {
		t.Helper()
		n := 0
		lister := js.ListStreams(ctx)
		for info := range lister.Info() {
			n += info.State.Consumers
		}
		if err := lister.Err(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return n
	}
	open := func(name string) (*Host, *nats.Conn) {
		t.Helper()
		nc, err := nats.Connect(srv.ClientURL(), nats.Name(name), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		lg, err := natsjs.OpenLog(ctx, nc, "fleet")
		if err != nil {
			t.Fatal(err)
		}
		h, err := Open(Config{Cache: t.TempDir(), Host: name, Log: lg, Blobs: blobs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h, nc
	}
	writer, _ := open("writer")
	write := func(i int) ledger.Seq {
		t.Helper()
		writeFile(t, writer, fmt.Sprintf("data/fleet/m%d/result/1/raw", i), fmt.Sprint("commit ", i))
		res, err := writer.Commit(ctx, CommitOptions{Message: fmt.Sprint("commit ", i)})
		if err != nil {
			t.Fatal(err)
		}
		return res.HWM
	}
	write(0)
	if n := consumers("before"); n != 0 {
		t.Fatalf("before the fleet: %d consumers", n)
	}

	// The fleet: each host watches, reporting the HWM of each commit it
	// applies.
	type watcher struct {
		nc     *nats.Conn
		cancel context.CancelFunc
		done   chan error
		mu     sync.Mutex
		hwm    ledger.Seq
	}
	fleet := make([]*watcher, fleetHosts)
	for i := range fleet {
		h, nc := open(fmt.Sprintf("host-%03d", i))
		wctx, wcancel := context.WithCancel(ctx)
		w := &watcher{nc: nc, cancel: wcancel, done: make(chan error, 1)}
		fleet[i] = w
		go func() {
			w.done <- h.Watch(wctx, SyncOptions{}, func(r SyncResult) {
				w.mu.Lock()
				w.hwm = max(w.hwm, r.HWM)
				w.mu.Unlock()
			})
		}()
	}
	waitAll := func(seq ledger.Seq, ws []*watcher) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			behind := 0
			for _, w := range ws {
				w.mu.Lock()
				if w.hwm < seq {
					behind++
				}
				w.mu.Unlock()
				select {
				case err := <-w.done:
					t.Fatalf("a watch ended: %v", err)
				default:
				}
			}
			if behind == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d hosts did not apply seq %d", behind, len(ws), seq)
			}
		}
	}
	waitAll(1, fleet)
	for i := 1; i <= 3; i++ {
		waitAll(write(i), fleet)
	}
	if n := consumers("while watching"); n != 0 {
		t.Fatalf("while %d hosts watch: %d consumers", fleetHosts, n)
	}

	// Half are killed: their connections drop without a word.
	for _, w := range fleet[:fleetHosts/2] {
		w.nc.Close()
	}
	rest := fleet[fleetHosts/2:]
	waitAll(write(4), rest)
	if n := consumers("after the kill"); n != 0 {
		t.Fatalf("after %d hosts were killed: %d consumers", fleetHosts/2, n)
	}
	for _, w := range rest {
		w.cancel()
		if err := <-w.done; err != nil {
			t.Fatalf("a watch stopped with %v", err)
		}
	}
	if n := consumers("after"); n != 0 {
		t.Fatalf("after the fleet stopped: %d consumers", n)
	}
}

package natsblob

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
)

// TestFaults runs the shared fault workload (faulty.Exercise) on the NATS
// object store: API-level faults (faulty.Store) on a connection that goes
// through a proxy dropping every connection every 150 ms, with retries
// (a ledger.Bucket's retry policy). Puts succeed after bounded retries or fail naming
// the blob; no get ever yields bytes other than the blob's; every blob a put
// acknowledged reads back.
func TestFaults(t *testing.T) {
	t.Parallel()
	direct := startServer(t)
	p, err := faulty.NewProxy(direct.ConnectedAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	nc, err := nats.Connect(p.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := New(t.Context(), Config{Conn: nc, Bucket: "faults"})
	if err != nil {
		t.Fatal(err)
	}
	clean, err := New(t.Context(), Config{Conn: direct, Bucket: "faults"})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.DropAll()
			}
		}
	}()
	fs := faulty.New(s, faulty.Config{Seed: 3, Rate: 0.2, Delay: time.Millisecond, Hang: 200 * time.Millisecond})
	// An attempt in flight when its connection drops waits for acks that never
	// come until AttemptTimeout ends it: that wait is most of the test's time,
	// so it is a second, ample for a 200 KiB object on loopback.
	policy := ledger.RetryPolicy{Attempts: 8, Wait: 5 * time.Millisecond, MaxWait: 100 * time.Millisecond, AttemptTimeout: time.Second}
	res := faulty.Exercise(t, t.Context(), fs, clean, faulty.Workload{Seed: 3, Blobs: 30, MaxSize: 200 << 10, Retry: &policy, MinPutSuccess: 0.9})
	close(stop)
	<-done
	_, drops := p.Stats()
	t.Logf("%v; faults injected: %v; connections dropped: %d", res, fs.Counts(), drops)
	if drops == 0 || fs.Total() == 0 {
		t.Fatalf("no fault reached the store: %d drops, %v", drops, fs.Counts())
	}
}

package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/internal/smallfs"
	"github.com/syncledger/syncledger/ledger"
)

// TestDiskFullTmpfs (SYNCLEDGER_TEST_DISKFULL, root): the server on a small
// tmpfs of its own.
//
// reserve: the disk fills with the server's own writes; the one that would
// take the free space below the reserve and those after are refused at once
// (err_code 10002), none waits out a timeout; once space is freed beside the
// store, writes are taken again, without a restart, with every acknowledged
// message kept.
//
// a write finds the disk full: something else fills it between two readings
// of the free space; that write is never answered by nats-server
// (it waits out the client's timeout) and its stream keeps the error; the
// watch, woken by nats-server's log, refuses the writes after it at once;
// once space is freed it restarts JetStream in process, and the stream takes
// writes again, with every acknowledged message kept.
func TestDiskFullTmpfs(t *testing.T) {
	t.Run("reserve", func(t *testing.T) {
		dir := smallfs.MountT(t, 32<<20)
		s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), SyncAlways: true, DiskInterval: 20 * time.Millisecond})
		w := newDiskWriter(t, s)
		filler := filepath.Join(dir, "filler")
		if _, err := smallfs.Fill(filler, 6<<20); err != nil {
			t.Fatal(err)
		}
		// Writes at 64 MB/s at most (a fast client over a network): the
		// reserve is what one read of the free space to the next can use,
		// not a CPU-starved test's in-process burst.
		w.pause = time.Millisecond
		err := w.fill(t, 2*time.Second)
		var ae *jetstream.APIError
		if !errors.As(err, &ae) || ae.ErrorCode != 10002 {
			t.Fatalf("the write the disk has no room for: %v, want err_code 10002", err)
		}
		st := s.Disk()
		free, _ := smallfs.Free(dir)
		t.Logf("refused after %d writes (%v each at most) with %s free: %s", w.acked, w.slowest, ledger.Bytes(free), st)
		if !st.Full || free == 0 || w.s.logs.failedSinceStart() {
			t.Fatalf("refused with %d bytes free, state %+v: the reserve did not hold (a write failed for lack of space: %v)", free, st, w.s.logs.failedSinceStart())
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		w.takenAgain(t)
	})
	t.Run("a write finds the disk full", func(t *testing.T) {
		dir := smallfs.MountT(t, 32<<20)
		// The disk fills between two readings of the free space: until a
		// write fails for lack of space, the watch reads the space free before
		// the filler (only nats-server's log of that write can tell it).
		var srv atomic.Pointer[Server]
		before, size, _, err := fsx.DiskSpace(dir)
		if err != nil {
			t.Fatal(err)
		}
		stat := func(d string) (uint64, uint64, bool, error) {
			if s := srv.Load(); s == nil || !s.logs.failedSinceStart() {
				return before, size, false, nil
			}
			return fsx.DiskSpace(d)
		}
		s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), SyncAlways: true, statDisk: stat})
		srv.Store(s)
		w := newDiskWriter(t, s)
		for range 5 {
			if err := w.publish(5 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		filler := filepath.Join(dir, "filler")
		if _, err := smallfs.Fill(filler, 0); err != nil {
			t.Fatal(err)
		}
		err = w.fill(t, 2*time.Second)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the write that finds the disk full: %v, want no answer (nats-server's own behaviour)", err)
		}
		start := time.Now()
		for !s.Disk().Full {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("the failed write did not wake the watch (failed %v, state %+v)", s.logs.failedSinceStart(), s.Disk())
			}
			time.Sleep(10 * time.Millisecond)
		}
		start = time.Now()
		err = w.publish(5 * time.Second)
		var ae *jetstream.APIError
		if !errors.As(err, &ae) || ae.ErrorCode != 10002 || time.Since(start) > time.Second {
			t.Fatalf("the write after it: %v after %v, want err_code 10002 at once", err, time.Since(start))
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		w.takenAgain(t)
		if s.logs.failedSinceStart() {
			t.Error("JetStream was not restarted: its store still has the failed write's error")
		}
	})
}

// diskWriter publishes to a stream of its own, counting what was acknowledged.
type diskWriter struct {
	s       *Server
	js      jetstream.JetStream
	acked   int
	slowest time.Duration
	pause   time.Duration // between writes in fill
}

func newDiskWriter(t *testing.T, s *Server) *diskWriter {
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	return &diskWriter{s: s, js: js}
}

var payload = make([]byte, 64<<10)

func (w *diskWriter) publish(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := w.js.Publish(ctx, "t.x", payload, jetstream.WithMsgID(fmt.Sprint(w.acked+1)))
	if err == nil {
		w.acked++
		w.slowest = max(w.slowest, time.Since(start))
	}
	return err
}

// fill publishes until a write fails, and returns that failure.
func (w *diskWriter) fill(t *testing.T, timeout time.Duration) error {
	for range 10000 {
		if err := w.publish(timeout); err != nil {
			return err
		}
		time.Sleep(w.pause)
	}
	t.Fatal("10000 writes of 64 KiB on a 32 MiB disk")
	return nil
}

// takenAgain waits for the next write to be taken, then checks the stream
// holds every acknowledged message.
func (w *diskWriter) takenAgain(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		err := w.publish(5 * time.Second)
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no write taken 10 s after space was freed: %v (%s)", err, w.s.Disk())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a write taken %v after space was freed", time.Since(start))
	info, err := w.js.Stream(t.Context(), "T")
	if err != nil {
		t.Fatal(err)
	}
	if st := info.CachedInfo().State; st.Msgs != uint64(w.acked) || st.LastSeq != uint64(w.acked) {
		t.Fatalf("the stream holds %d messages (last seq %d), %d were acknowledged", st.Msgs, st.LastSeq, w.acked)
	}
}

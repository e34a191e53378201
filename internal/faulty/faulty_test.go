package faulty_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
)

func fileStore(t *testing.T) driver.Bucket {
	t.Helper()
	s, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// retry is the policy the fault tests use: quick, and enough attempts that a
// 30% fault rate almost never exhausts them.
var retry = ledger.RetryPolicy{Attempts: 6, Wait: time.Millisecond, MaxWait: 5 * time.Millisecond, AttemptTimeout: time.Second}

// TestDeterministic: the same seed draws the same faults for the same calls,
// whatever the order of the calls on different keys.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	draw := func(order []string) string {
		s := faulty.New(fileStore(t), faulty.Config{Seed: 7, Rate: 0.5, Faults: []faulty.Fault{faulty.ServerError}})
		got := map[string][]bool{}
		for _, k := range order {
			_, err := s.Stat(ctx, k)
			got[k] = append(got[k], errors.Is(err, faulty.ErrInjected))
		}
		return fmt.Sprint(got)
	}
	a := draw([]string{"a", "b", "a", "c", "b", "a"})
	b := draw([]string{"c", "b", "b", "a", "a", "a"})
	if a != b {
		t.Fatalf("same seed, different faults: %s vs %s", a, b)
	}
}

// TestExerciseFile runs the shared fault workload on the file backend behind
// a faulty Store, without and with retries.
func TestExerciseFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		retry *ledger.RetryPolicy
		floor float64
	}{
		{"no retries", nil, 0},
		{"retries", &retry, 0.97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clean := fileStore(t)
			fs := faulty.New(clean, faulty.Config{Seed: 42, Rate: 0.3, Delay: time.Millisecond, Hang: 50 * time.Millisecond})
			res := faulty.Exercise(t, ctx, fs, clean, faulty.Workload{Seed: 42, Retry: tc.retry, MinPutSuccess: tc.floor})
			t.Logf("%v; faults injected: %v", res, fs.Counts())
			if fs.Total() == 0 {
				t.Fatal("no fault injected")
			}
			if tc.retry == nil && res.PutsFailed == 0 {
				t.Error("no put failed without retries: the faults did not reach the puts")
			}
		})
	}
}

// TestProxyCutAfter: a write containing the pattern reaches the server, and
// the connection is cut before the answer.
func TestProxyCutAfter(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c)
		got <- string(b)
		c.Close()
	}()
	p, err := faulty.NewProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.CutAfter([]byte("PUB x"), 1)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PUB x 1\r\na\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection was not cut")
	}
	select {
	case s := <-got:
		if !strings.Contains(s, "PUB x 1") {
			t.Fatalf("server got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not get the write")
	}
	if cuts, _ := p.Stats(); cuts != 1 {
		t.Fatalf("cuts %d, want 1", cuts)
	}
}

// echoServer accepts connections and echoes what each sends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes b and reads it back through c, returning the time taken.
func roundTrip(t *testing.T, c net.Conn, b string) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte(b)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != b {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	return time.Since(start)
}

// TestProxyDelay: each direction adds its delay to a round trip, and order
// is kept.
func TestProxyDelay(t *testing.T) {
	t.Parallel()
	p, err := faulty.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := roundTrip(t, c, "warm"); d > 40*time.Millisecond {
		t.Logf("an undelayed round trip took %v (a loaded machine)", d)
	}
	p.SetDelay(30*time.Millisecond, 50*time.Millisecond)
	if d := roundTrip(t, c, "slow"); d < 80*time.Millisecond {
		t.Fatalf("a round trip with 30 + 50 ms of delay took %v", d)
	}
	// Many writes in a row come back in order, after one round trip's delay
	// (not one per write).
	start := time.Now()
	var want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&want, "%02d", i)
		if _, err := c.Write([]byte(fmt.Sprintf("%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, want.Len())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want.String() {
		t.Fatalf("20 writes came back as %q, %v", got, err)
	}
	if d := time.Since(start); d < 80*time.Millisecond || d > 2*time.Second {
		t.Fatalf("20 pipelined writes took %v, want about one delayed round trip", d)
	}
	p.SetDelay(0, 0)
	if d := roundTrip(t, c, "fast"); d > time.Second {
		t.Fatalf("an undelayed round trip took %v", d)
	}
}

// TestProxyStall: a stalled direction holds what it reads, loses nothing,
// and forwards it in order on Resume; the connection stays open.
func TestProxyStall(t *testing.T) {
	t.Parallel()
	p, err := faulty.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "before")
	for _, dir := range []struct {
		name               string
		toServer, toClient bool
	}{{"to the server", true, false}, {"to the client", false, true}} {
		p.Stall(dir.toServer, dir.toClient)
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(make([]byte, 4)); err == nil {
			t.Fatalf("stalled %s: %d bytes arrived", dir.name, n)
		}
		p.Resume()
		got := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
			t.Fatalf("after a stall %s: %q, %v", dir.name, got, err)
		}
	}
	roundTrip(t, c, "after")
}

// TestTruncatedBodyRefused: a get whose body is cut short never yields content
// that the blob store accepts.
func TestTruncatedBodyRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clean := fileStore(t)
	content := bytes.Repeat([]byte("syncledger "), 1000)
	none := ledger.RetryPolicy{Attempts: 1}
	d, err := ledger.PutBytes(ctx, ledger.NewBucket(clean, none), content)
	if err != nil {
		t.Fatal(err)
	}
	fs := faulty.New(clean, faulty.Config{Seed: 1, Rate: 1, Faults: []faulty.Fault{faulty.Truncate}})
	_, err = ledger.ReadBlob(ctx, ledger.NewBucket(fs, none), d)
	if !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("read of a truncated body: %v, want ErrChecksum", err)
	}
	// Retries do not help a clean EOF (only verification sees it), and do not
	// hide it either.
	_, err = ledger.ReadBlob(ctx, ledger.NewBucket(fs, retry), d)
	if !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("read of a truncated body through retries: %v, want ErrChecksum", err)
	}
	// A reset body is resumed under the retry policy and verifies.
	fs = faulty.New(clean, faulty.Config{Seed: 1, Rate: 0.5, Faults: []faulty.Fault{faulty.Reset}})
	for range 10 {
		got, err := ledger.ReadBlob(ctx, ledger.NewBucket(fs, retry), d)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("read through resets with retries: %d bytes, %v", len(got), err)
		}
	}
}

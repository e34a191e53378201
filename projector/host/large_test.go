package host

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// heapPeak samples the live heap every millisecond until stop is called, and
// returns the largest figure seen above the one at the start.
func heapPeak() (stop func() uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base, peak := read(), uint64(0)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak {
				peak = v
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		if peak < base {
			return 0
		}
		return peak - base
	}
}

// TestLargeFileFlatMemory: a 256 MiB sparse file commits and syncs with the
// heap growing by a small bound, not by the file's size: the commit hashes and
// uploads it streaming, the sync fetches and writes it streaming (issue 17,
// target 6; the bench harness runs 10 GiB, `bench --only B14 --large 10GiB`).
func TestLargeFileFlatMemory(t *testing.T) {
	const size = 256 << 20
	const bound = 24 << 20 // a few copy buffers and parts, never the file
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	rel := "data/t/big/d/1/raw"
	p := filepath.Join(a.Dir().Root(), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil { // sparse: no blocks written
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	stop := heapPeak()
	res, err := a.Commit(context.Background(), CommitOptions{Message: "large"})
	grew := stop()
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 1 || res.Bytes != size {
		t.Fatalf("commit %+v", res)
	}
	t.Logf("commit of a %d MiB file: heap grew by at most %.1f MiB", size>>20, float64(grew)/(1<<20))
	if grew > bound {
		t.Errorf("commit: heap grew by %d bytes, over %d: the file is held in memory", grew, bound)
	}
	stop = heapPeak()
	sr := mustSync(t, b, SyncOptions{})
	grew = stop()
	if sr.Written != 1 || sr.Bytes != size {
		t.Fatalf("sync %+v", sr)
	}
	t.Logf("sync of a %d MiB file: heap grew by at most %.1f MiB", size>>20, float64(grew)/(1<<20))
	if grew > bound {
		t.Errorf("sync: heap grew by %d bytes, over %d: the file is held in memory", grew, bound)
	}
	if v, err := b.Verify(context.Background()); err != nil || !v.OK() || v.Checked != 1 {
		t.Fatalf("verify: %+v %v", v, err)
	}
}

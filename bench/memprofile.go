package bench

import (
	"context"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// peakHeapProfile writes the heap profile (in-use and allocated objects, as
// of the last GC) to path each time the live heap passes its highest point
// so far by a tenth, until ctx ends: the file then shows what held the
// memory at the run's peak, which a profile written at exit cannot.
func peakHeapProfile(ctx context.Context, path string) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var high uint64
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > high+high/10 {
			high = v
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	}
}

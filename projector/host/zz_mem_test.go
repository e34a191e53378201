package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"runtime"
	"runtime/metrics"
	"time"
	"runtime/pprof"
	"testing"
)

func TestZZMemProfile(t *testing.T) {
	if os.Getenv("ZZMEM") == "" {
		t.Skip()
	}
	files := 100_000
	e := newEnv(t)
	a := e.host("a")
	for i := range files {
		writeFile(t, a, fmt.Sprintf("data/t/m%04d/d/%d/raw", i%10000, i), fmt.Sprint(i))
	}
	if os.Getenv("ZZHOLD") != "" { a.cfg.CommitHold = 13107 }
	done := make(chan struct{})
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var max uint64
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > max*12/10 {
				runtime.GC()
				metrics.Read(sample)
				if v = sample[0].Value.Uint64(); v > max {
					max = v
					f, _ := os.Create("/tmp/heap-peak.out")
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
					fmt.Println("live", v>>20, "MiB")
				}
			}
		}
	}()
	defer close(done)
	stop := heapPeak()
	res, err := a.Commit(context.Background(), CommitOptions{Message: "big", MaxPaths: 20})
	grew := stop()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "Rss") || strings.HasPrefix(l, "VmHWM") {
			t.Log(l)
		}
	}
	sm, _ := os.ReadFile("/proc/self/smaps")
	var head string
	for _, l := range strings.Split(string(sm), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && strings.Contains(f[0], "-") {
			head = l
		}
		if len(f) >= 2 && f[0] == "Rss:" && len(f[1]) >= 4 {
			t.Log(head, l)
		}
	}
	fi, _ := os.Stat(filepath.Join(a.Dir().Root(), ".syncledger", "state.db"))
	if fi != nil {
		t.Logf("state.db %d MiB", fi.Size()>>20)
	}
	t.Logf("commits %d, written %d, heap peak grew %.1f MiB", len(res.Commits), res.Written, float64(grew)/(1<<20))
}

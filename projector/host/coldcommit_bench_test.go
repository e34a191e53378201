//go:build unix

package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// BenchmarkColdCommitFiles is B13's cold commit without the server: a host
// commits 20,000 new 256-byte files in swamp's layout (a directory a file
// version) to the in-memory twin with a file blob store, in one full-scan
// commit. It reports the process's CPU time a file (user and system: most of
// a cold commit is system calls), the figure a change to the commit's per-file
// work moves; B13 (bench/) measures the rate against its raw loop on a real
// server. Run it on tmpfs, as B13 does:
//
//	TMPDIR=/dev/shm go test -run '^$' -bench ColdCommitFiles -benchtime 5x ./projector/host/
func BenchmarkColdCommitFiles(b *testing.B) {
	const n = 20_000
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		cache := filepath.Join(root, "cache")
		for f := range n {
			p := filepath.Join(cache, "data", "model", fmt.Sprintf("m%03d", f%200), fmt.Sprintf("file-%04d", f/200), "1", "raw")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, fmt.Appendf(nil, "%0256d", f), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		lg, err := memledger.New(ledger.Info{Name: "bench", Blobs: "file:///unused"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		objs, err := fileblob.New(fileblob.Config{Dir: filepath.Join(root, "blobs")})
		if err != nil {
			b.Fatal(err)
		}
		h, err := Open(Config{Cache: cache, Host: "bench", Log: lg, Blobs: ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})})
		if err != nil {
			b.Fatal(err)
		}
		c0 := processCPU()
		b.StartTimer()
		res, err := h.Commit(context.Background(), CommitOptions{MaxPaths: 20})
		b.StopTimer()
		cpu += processCPU() - c0
		if err != nil || res.Written != n {
			b.Fatalf("commit wrote %d files, want %d: %v", res.Written, n, err)
		}
		h.Close()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "µs-cpu/file")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "files/s")
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

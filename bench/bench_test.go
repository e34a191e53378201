package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

func TestMain(m *testing.M) {
	// The harness re-executes this test binary for its child processes.
	if ok, err := Child(context.Background()); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// s3Mode is the S3 server of the tests and benchmarks: the one
// SYNCLEDGER_TEST_S3_ENDPOINT names, else gofakes3 in the process — said so in
// the output, never silently.
func s3Mode(tb testing.TB) string {
	if os.Getenv("SYNCLEDGER_TEST_S3_ENDPOINT") != "" {
		return S3Env
	}
	tb.Log("SYNCLEDGER_TEST_S3_ENDPOINT is not set: S3 rows run against gofakes3 in this process, NOT a real S3 server " +
		"(eval \"$(scripts/versitygw.sh)\" to use versitygw)")
	return S3Fake
}

type logWriter struct{ tb testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestQuick runs the whole harness in quick mode, so that it cannot rot. It
// checks that every scenario produced its rows, not their figures: no benchmark
// is a timed unit test.
func TestQuick(t *testing.T) {
	// Benchmarks do not run in the default `go test ./...` (issue 8); .ci/run
	// sets SYNCLEDGER_TEST_BENCH=1 so the harness cannot rot.
	if os.Getenv("SYNCLEDGER_TEST_BENCH") == "" {
		t.Skip("TestQuick runs every benchmark scenario at a small size (about 20 s); set SYNCLEDGER_TEST_BENCH=1 to run it")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	rep, err := Run(ctx, Config{Quick: true, S3: s3Mode(t), Log: logWriter{t}, Command: "go test ./bench -run TestQuick"})
	if rep != nil {
		var b strings.Builder
		rep.Markdown(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rep.Rows {
		seen[r.ID]++
		if r.N == 0 || r.Median <= 0 {
			t.Errorf("%s (%s): no measurement: %+v", r.ID, r.Size, r)
		}
		if r.Baseline != "" && r.Base <= 0 {
			t.Errorf("%s (%s): no baseline measurement", r.ID, r.Size)
		}
	}
	for id, want := range map[string]int{"B1": 2, "B2": 1, "B3": 1, "B4": 2, "B5": 1, "B6": 1, "B7": 2, "B8": 1, "B9": 2, "B11": 3, "B12": 3, "B13": 2, "B14": 2} {
		if seen[id] != want {
			t.Errorf("%s: %d rows, want %d", id, seen[id], want)
		}
	}
	t.Logf("quick run took %s", time.Since(t0).Round(time.Millisecond))
}

// The Go benchmarks run the scenarios' operations under the testing package, for
// profiling (go test -cpuprofile) one operation at a time. They start their own
// NATS child and S3 server (see s3Mode). Sizes: -bench.files (default 100, so
// that -benchtime 1x is quick; the harness's figure is 1000), -bench.commits
// for BenchmarkLazySync. Example:
//
//	go test -run '^$' -bench NoopCommit -cpuprofile cpu.out ./bench -args -bench.files=1000
//	go tool pprof -top bench.test cpu.out
//
// -bench.profile=FILE instead profiles the measured loop only, without the setup.
var (
	benchFiles   = flag.Int("bench.files", 100, "files of the benchmarks' data set (20 per model)")
	benchCommits = flag.Int("bench.commits", 2000, "commits in BenchmarkLazySync's log")
	benchProfile = flag.String("bench.profile", "", "write a CPU profile of the measured loop only (not the setup) to this file")
)

// loop is called after a benchmark's setup, right before its loop: with
// -bench.profile it starts the CPU profile there, so that the profile holds the
// measured operations, not the seeding of the data set (go test -cpuprofile
// covers both).
func loop(b *testing.B) {
	b.Helper()
	if *benchProfile == "" {
		return
	}
	f, err := os.Create(*benchProfile)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}

// benchRunner starts a harness environment for a Go benchmark.
func benchRunner(b *testing.B) (*runner, context.Context) {
	b.Helper()
	ctx := context.Background()
	cfg := Config{Quick: true, S3: s3Mode(b)}
	cfg.Self = []string{os.Args[0]}
	e, err := newEnv(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	sz := sizesFor(cfg)
	sz.files = *benchFiles
	r := &runner{e: e, cfg: cfg, sz: sz, rep: &Report{}, sets: map[int]*dataset{}, synced: map[int]*host.Host{}}
	b.Cleanup(func() {
		for i := len(r.closes) - 1; i >= 0; i-- {
			r.closes[i]()
		}
		e.close()
	})
	return r, ctx
}

// BenchmarkNoopSync is B1's operation.
func BenchmarkNoopSync(b *testing.B) {
	r, ctx := benchRunner(b)
	h, err := r.syncedHost(ctx, r.sz.files)
	if err != nil {
		b.Fatal(err)
	}
	f := noopSync(ctx, h, host.SyncOptions{})
	loop(b)
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNoopScopedSync is B2's operation.
func BenchmarkNoopScopedSync(b *testing.B) {
	r, ctx := benchRunner(b)
	h, err := r.syncedHost(ctx, r.sz.files)
	if err != nil {
		b.Fatal(err)
	}
	f := noopSync(ctx, h, host.SyncOptions{Partitions: modelKeys(0)})
	loop(b)
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNoopCommit is B3's operation.
func BenchmarkNoopCommit(b *testing.B) {
	r, ctx := benchRunner(b)
	h, err := r.syncedHost(ctx, r.sz.files)
	if err != nil {
		b.Fatal(err)
	}
	loop(b)
	for b.Loop() {
		if res, err := h.Commit(ctx, host.CommitOptions{}); err != nil || !res.Nothing {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkColdSync is B4's operation: a new cache syncs the data set from S3.
func BenchmarkColdSync(b *testing.B) {
	r, ctx := benchRunner(b)
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		b.Fatal(err)
	}
	loop(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h, dir, err := r.openHost(d.log, d.blobs, "cold", "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := h.Sync(ctx, host.SyncOptions{})
		b.StopTimer()
		if err != nil || res.Written != r.sz.files {
			b.Fatal(res.Written, err)
		}
		h.Close()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}

// BenchmarkScopedSync is B5's operation: a new cache syncs one model from S3.
func BenchmarkScopedSync(b *testing.B) {
	r, ctx := benchRunner(b)
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		b.Fatal(err)
	}
	loop(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h, dir, err := r.openHost(d.log, d.blobs, "scoped", "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := h.Sync(ctx, host.SyncOptions{Partitions: modelKeys(i % d.l.Models)})
		b.StopTimer()
		if err != nil || res.Written != d.l.PerModel {
			b.Fatal(res.Written, err)
		}
		h.Close()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}

// BenchmarkColdCommit is B6's operation: a host commits the data set's files to
// a new ledger with its blobs on a new S3 prefix.
func BenchmarkColdCommit(b *testing.B) {
	r, ctx := benchRunner(b)
	nc, err := r.e.connect()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	l := layoutOf(r.sz.files, r.sz.fileSize)
	loop(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		lg, err := r.e.createLedger(ctx, nc, "cold")
		if err != nil {
			b.Fatal(err)
		}
		objs, err := r.e.s3Objects(ctx, "cold")
		if err != nil {
			b.Fatal(err)
		}
		h, dir, err := r.openHost(lg, ledger.NewBucket(objs, noRetry), "cold", "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := writeTree(dir, l, i); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := h.Commit(ctx, host.CommitOptions{})
		b.StopTimer()
		if err != nil || res.Written != l.Files() {
			b.Fatal(res.Written, err)
		}
		h.Close()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}

// BenchmarkCommitOneFile is one writer's operation in B7: change one small file
// of one model, commit it (file blobs). changed: with the path as a hint
// (CommitOptions.Changed, as B7, swamp's extension and a watch's dirty set
// commit), which walks nothing else; scan: a full scan of the cache.
// changed-fenced-N: changed, under N locks' fences (ledger.Fence; 2 is a
// swamp model run's push: the model's lock and the global lock): one event
// and N fence checks, an atomic batch where the unfenced commit is one
// publish.
func BenchmarkCommitOneFile(b *testing.B) {
	for _, c := range []struct {
		name   string
		hinted bool
		fences int
	}{{"scan", false, 0}, {"changed", true, 0}, {"changed-fenced-1", true, 1}, {"changed-fenced-2", true, 2}} {
		b.Run(c.name, func(b *testing.B) { commitOneFile(b, c.hinted, c.fences) })
	}
}

func commitOneFile(b *testing.B, hinted bool, fences int) {
	r, ctx := benchRunner(b)
	nc, err := r.e.connect()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	lg, err := r.e.createLedger(ctx, nc, "commit")
	if err != nil {
		b.Fatal(err)
	}
	objs, err := r.e.fileObjects("commit-blobs")
	if err != nil {
		b.Fatal(err)
	}
	h, dir, err := r.openHost(lg, ledger.NewBucket(objs, noRetry), "commit", "bench")
	if err != nil {
		b.Fatal(err)
	}
	r.keepHost(h, dir)
	if err := writeTree(dir, layout{Models: 1, PerModel: 1, Size: 256}, 0); err != nil {
		b.Fatal(err)
	}
	p := dir + "/" + filePath(0, 0)
	opt := host.CommitOptions{}
	for i := range fences {
		lock := fmt.Sprintf("data/bench/m%d/.lock", i)
		seq, err := lg.TakeFence(ctx, ledger.FenceRecord{V: ledger.FormatVersion, Ledger: lg.UUID(), Lock: lock,
			ID: fmt.Sprintf("019a0000-0000-7000-8000-%012d", i), Host: "bench", At: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		opt.Fences = append(opt.Fences, ledger.Fence{Lock: lock, Seq: seq})
	}
	if hinted {
		if _, err := h.Commit(ctx, opt); err != nil { // the full scan the hints start from
			b.Fatal(err)
		}
		opt.Changed = []string{filePath(0, 0)}
	}
	i := 0
	loop(b)
	for b.Loop() {
		i++
		if err := os.WriteFile(p, content(i, 0, 0, 256), 0o644); err != nil {
			b.Fatal(err)
		}
		if res, err := h.Commit(ctx, opt); err != nil || res.Written != 1 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkLazySync is B9's operation in this process: a lazy full sync of a
// log of -bench.commits single-file commits into a new cache.
func BenchmarkLazySync(b *testing.B) {
	r, ctx := benchRunner(b)
	nc, err := r.e.connect()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	lg, err := r.e.createLedger(ctx, nc, "lazy")
	if err != nil {
		b.Fatal(err)
	}
	n := *benchCommits
	if err := seedCommits(ctx, nc, lg, layoutOf(r.sz.files, r.sz.fileSize), n); err != nil {
		b.Fatal(err)
	}
	objs, err := r.e.fileObjects("lazy-blobs")
	if err != nil {
		b.Fatal(err)
	}
	loop(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h, dir, err := r.openHost(lg, ledger.NewBucket(objs, noRetry), "lazy", "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := h.Sync(ctx, host.SyncOptions{Lazy: true})
		b.StopTimer()
		if err != nil || res.Events != n {
			b.Fatal(res.Events, err)
		}
		h.Close()
		os.RemoveAll(dir)
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRawOrderedRead is B9's baseline in this process.
func BenchmarkRawOrderedRead(b *testing.B) {
	r, ctx := benchRunner(b)
	nc, err := r.e.connect()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	lg, err := r.e.createLedger(ctx, nc, "raw")
	if err != nil {
		b.Fatal(err)
	}
	n := *benchCommits
	if err := seedCommits(ctx, nc, lg, layoutOf(r.sz.files, r.sz.fileSize), n); err != nil {
		b.Fatal(err)
	}
	loop(b)
	for b.Loop() {
		if got, err := rawOrderedRead(ctx, nc, lg.Stream(), 1, n); err != nil || got != n {
			b.Fatal(got, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRawStreamInfo is B1's (and B3's) baseline.
func BenchmarkRawStreamInfo(b *testing.B) {
	r, ctx := benchRunner(b)
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		b.Fatal(err)
	}
	loop(b)
	for b.Loop() {
		if _, err := rawStreamInfo(ctx, d.nc, d.log.Stream()); err != nil {
			b.Fatal(err)
		}
	}
}

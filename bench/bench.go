package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/syncledger/syncledger/projector/host"
)

// Config configures a harness run.
type Config struct {
	// Quick runs every scenario at a small size with few runs: a smoke test
	// that the harness works (CI), not figures to compare.
	Quick bool
	// Big adds B4 (and B3) at 100,000 files, B12 and B13 at 1,000,000, which takes several minutes.
	Big bool
	// Only limits the run to these scenario ids (B1 … B10); empty runs all.
	Only []string
	// Scratch is the directory under which the run's scratch directory (caches,
	// the NATS store, the S3 server's data, blob stores) is made. Empty means
	// /dev/shm if present, else os.TempDir().
	Scratch string
	// Keep keeps the scratch directory after the run.
	Keep bool
	// S3 selects the S3 server of the S3 rows: S3Auto (default), S3Versitygw,
	// S3Env or S3Fake.
	S3 string
	// Runs overrides the number of measured runs of the cold scenarios (B4–B6).
	Runs int
	// LargeMiB is the size of B14's sparse file in MiB; 0 means 256 (quick:
	// 72, above the S3 store's multipart threshold). 10 GiB needs a scratch
	// directory on disk (--scratch): the S3 server stores it, and the sync
	// writes it.
	LargeMiB int
	// B9Commits is the length of B9's log; 0 means 1,000,000 (quick: 2,000).
	B9Commits int
	// Self is the command line that re-executes this binary as a harness child
	// process (the binary must call Child first thing). Empty means
	// os.Executable() without arguments.
	Self []string
	// ChildProfile, when set, makes each B9 replay child write its CPU profile
	// to ChildProfile.<mode> (the last run of each mode wins).
	ChildProfile string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Command is the command line, recorded in the report.
	Command string
	// WaitLoad, when positive, makes Run wait before starting until the 1-minute
	// load average is below it, for at most WaitMax (default 20 minutes); the run
	// starts anyway after that, and the report says so.
	WaitLoad float64
	WaitMax  time.Duration
	// Swamp is the swamp CLI for B10; empty means SYNCLEDGER_TEST_SWAMP. A run
	// of every scenario without one leaves B10 out, and the report says so.
	Swamp string
}

// sizes are the scenario sizes and repetition counts of a run.
type sizes struct {
	files, fileSize int
	noopWarm        int // B1, B2 warm-up rounds
	noopSamples     int // B1, B2 measured rounds
	commitWarm      int // B3
	commitSamples   int
	coldWarm        int // B4, B6
	coldRuns        int
	scaleRuns       int // B4 at 10k+ files
	scopedWarm      int // B5
	scopedRuns      int
	b7Runs          int
	b7Dur           time.Duration
	b8Warm          int
	b8Samples       int
	b9Commits       int
	b9Runs          int
	b1Scale         []int // index entries beyond the real cache of files
	b4Scale         []int // files beyond files
	parallel        int   // host.Config.Parallel: the CLI's default
	bulkFiles       int   // B13
	bulkSize        int
	bulkRuns        int // the first is a warm-up when more than one
	largeMiB        int // B14
	largeRuns       int
}

func sizesFor(cfg Config) sizes {
	s := sizes{
		files: 1000, fileSize: 5 << 10,
		noopWarm: 50, noopSamples: 400,
		commitWarm: 5, commitSamples: 60,
		coldWarm: 1, coldRuns: 7, scaleRuns: 3,
		scopedWarm: 2, scopedRuns: 15,
		b7Runs: 3, b7Dur: 3 * time.Second,
		b8Warm: 10, b8Samples: 300,
		b9Commits: 1_000_000, b9Runs: 3,
		b1Scale:   []int{10_000, 100_000, 1_000_000},
		b4Scale:   []int{10_000},
		parallel:  16,
		bulkFiles: 100_000, bulkSize: 256, bulkRuns: 4,
		largeMiB: 256, largeRuns: 2,
	}
	if cfg.Big {
		s.b4Scale = append(s.b4Scale, 100_000)
	}
	if cfg.Quick {
		s = sizes{
			files: 100, fileSize: 5 << 10,
			noopWarm: 5, noopSamples: 20,
			commitWarm: 1, commitSamples: 5,
			coldWarm: 1, coldRuns: 2, scaleRuns: 1,
			scopedWarm: 1, scopedRuns: 3,
			b7Runs: 1, b7Dur: 300 * time.Millisecond,
			b8Warm: 2, b8Samples: 10,
			b9Commits: 2000, b9Runs: 1,
			b1Scale:   []int{10_000},
			parallel:  16,
			bulkFiles: 1000, bulkSize: 256, bulkRuns: 1,
			largeMiB: 72, largeRuns: 1,
		}
	}
	if cfg.Runs > 0 {
		s.coldRuns, s.scopedRuns = cfg.Runs, 2*cfg.Runs
	}
	if cfg.LargeMiB > 0 {
		s.largeMiB, s.largeRuns = cfg.LargeMiB, 1
	}
	if cfg.B9Commits > 0 {
		s.b9Commits = cfg.B9Commits
	}
	return s
}

// Scenarios are the scenario ids, in the order Run runs them.
var Scenarios = []string{"B6", "B4", "B5", "B1", "B2", "B3", "B8", "B7", "B9", "B10", "B11", "B12", "B13", "B14"}

// Run runs the selected scenarios and returns their report. A scenario that
// fails ends the run with its error; the report holds the rows measured so far.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	for _, id := range cfg.Only {
		if !slices.Contains(Scenarios, id) {
			return nil, fmt.Errorf("scenario %q: want one of %s", id, strings.Join(Scenarios, ", "))
		}
	}
	if len(cfg.Self) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this binary to start child processes: %w", err)
		}
		cfg.Self = []string{exe}
	}
	cfg.Swamp = swampPath(cfg)
	if cfg.Swamp == "" && slices.Contains(cfg.Only, "B10") {
		return nil, errors.New(b10Skipped)
	}
	rep := &Report{Command: cfg.Command, Quick: cfg.Quick, Only: cfg.Only}
	if cfg.Swamp == "" && len(cfg.Only) == 0 {
		rep.Notes = append(rep.Notes, b10Skipped)
	}
	rep.waitForLoad(ctx, cfg)
	rep.Start, rep.LoadStart = time.Now(), loadAvg()
	rep.Machine = machine()
	e, err := newEnv(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer e.close()
	rep.Scratch, rep.ScratchFS = e.scratch, fsType(e.scratch)
	rep.NATS = fmt.Sprintf("embedded nats-server %s in a child process (pid %d), file store in the scratch directory, default sync (no fsync per ack)", natsServerVersion(), e.nats.pid)
	rep.S3 = e.s3.kind
	r := &runner{e: e, cfg: cfg, sz: sizesFor(cfg), rep: rep, sets: map[int]*dataset{}, synced: map[int]*host.Host{}}
	err = r.run(ctx)
	rep.End, rep.LoadEnd = time.Now(), loadAvg()
	return rep, err
}

func (rep *Report) waitForLoad(ctx context.Context, cfg Config) {
	if cfg.WaitLoad <= 0 {
		return
	}
	limit := cfg.WaitMax
	if limit <= 0 {
		limit = 20 * time.Minute
	}
	start := time.Now()
	for {
		la := loadAvg()
		if la[0] < cfg.WaitLoad {
			rep.Notes = append(rep.Notes, fmt.Sprintf("waited %s for the 1-minute load average to fall below %.2f (it was %.2f)", time.Since(start).Round(time.Second), cfg.WaitLoad, la[0]))
			return
		}
		if time.Since(start) > limit || ctx.Err() != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the 1-minute load average stayed at or above %.2f for %s (now %.2f): ran anyway", cfg.WaitLoad, limit, la[0]))
			return
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "bench: load average %.2f ≥ %.2f, waiting (%s so far)\n", la[0], cfg.WaitLoad, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
	}
}

// runner runs the scenarios of one harness run.
type runner struct {
	e      *env
	cfg    Config
	sz     sizes
	rep    *Report
	sets   map[int]*dataset   // data sets on S3 by file count
	synced map[int]*host.Host // a synced host per data set size (B4 leaves them; B1–B3, B8 use them)
	closes []func()           // run at the end, in reverse
	tools  *tools             // B11, B12: the CLI and natsinfo, built once
}

func (r *runner) want(id string) bool {
	return len(r.cfg.Only) == 0 || slices.Contains(r.cfg.Only, id)
}

func (r *runner) run(ctx context.Context) error {
	steps := []struct {
		id string
		f  func(context.Context) error
	}{
		{"B6", r.b6}, {"B4", r.b4}, {"B5", r.b5}, {"B1", r.b1}, {"B2", r.b2},
		{"B3", r.b3}, {"B8", r.b8}, {"B7", r.b7}, {"B9", r.b9}, {"B10", r.b10},
		{"B11", r.b11}, {"B12", r.b12}, {"B13", r.b13}, {"B14", r.b14},
	}
	defer func() {
		for i := len(r.closes) - 1; i >= 0; i-- {
			r.closes[i]()
		}
	}()
	for _, s := range steps {
		if !r.want(s.id) || (s.id == "B10" && r.cfg.Swamp == "") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		r.e.logf("bench: %s …", s.id)
		if err := s.f(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.id, err)
		}
		r.e.logf("bench: %s done in %s", s.id, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

func (r *runner) add(row Row) {
	r.rep.Rows = append(r.rep.Rows, row)
	r.e.logf("bench: %s", row.oneLine())
}

// series is the measurements of one operation: a duration (and a count of the
// operations it covered) per sample, and the CPU time and peak RSS over them.
type series struct {
	d      []time.Duration
	counts []int
	cpu    cpuSample // total over the samples
	peak   int64     // bytes; 0: unknown
	child  bool      // peak is a child process's
}

func (s *series) add(d time.Duration, count int, cpu cpuSample, peak int64) {
	s.d = append(s.d, d)
	s.counts = append(s.counts, count)
	s.cpu.client += cpu.client
	s.cpu.nats += cpu.nats
	s.cpu.s3 += cpu.s3
	s.peak = max(s.peak, peak)
}

func (s *series) ops() int {
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

// ms returns the samples in milliseconds per operation.
func (s *series) ms() []float64 {
	out := make([]float64, len(s.d))
	for i, d := range s.d {
		out[i] = float64(d) / float64(time.Millisecond) / float64(max(1, s.counts[i]))
	}
	return out
}

// rates returns the samples as operations per second.
func (s *series) rates() []float64 {
	out := make([]float64, len(s.d))
	for i, d := range s.d {
		out[i] = float64(s.counts[i]) / d.Seconds()
	}
	return out
}

// op is one timed operation: prep runs before it untimed, done after it
// untimed. run returns how many operations it did (1, or a throughput run's
// count) and may return its own duration (B8's latency); 0 means the wall time
// of run.
type op struct {
	s    *series
	prep func() error
	run  func() (time.Duration, int, error)
	done func() error
}

// measure runs o once and records it unless warm.
func (e *env) measure(o op, warm bool) error {
	if o.prep != nil {
		if err := o.prep(); err != nil {
			return err
		}
	}
	// The previous operation's garbage is not this one's: collected, and its
	// pages returned, so that the peak RSS below starts from what is live.
	debug.FreeOSMemory()
	resetPeakRSS()
	c0 := e.cpu()
	t0 := time.Now()
	d, n, err := o.run()
	wall := time.Since(t0)
	c1 := e.cpu()
	peak := peakRSS()
	if err != nil {
		return err
	}
	if d == 0 {
		d = wall
	}
	if !warm {
		o.s.add(d, n, c1.sub(c0), peak)
	}
	if o.done != nil {
		return o.done()
	}
	return nil
}

// interleave runs warm rounds, then rounds measured rounds; each round runs
// every op once, in order, so that a baseline and the operations compared with
// it see the same machine.
func (e *env) interleave(ctx context.Context, warm, rounds int, ops ...op) error {
	for i := range warm + rounds {
		for _, o := range ops {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := e.measure(o, i < warm); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrap adapts a func() error to op.run: one operation, its wall time.
func wrap(f func() error) func() (time.Duration, int, error) {
	return func() (time.Duration, int, error) { return 0, 1, f() }
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Usage is the harness's command-line help.
const Usage = `Run syncledger's benchmark scenarios (B1–B12) against raw JetStream baselines (B10: swamp's filesystem datastore).

Prints a Markdown table: median, min and max of several runs after a warm-up,
each against its raw JetStream (and S3) baseline measured in the same run,
interleaved with it, with CPU time per operation (client, NATS server, S3
server) and peak RSS. Starts everything it needs: an embedded NATS server in a
child process and, for the S3 rows, a versitygw process (or the server
SYNCLEDGER_TEST_S3_ENDPOINT names; --s3 fake uses gofakes3 in-process and says
so). The full run takes 15–30 minutes on 2 CPUs; --quick runs every scenario at
a small size in seconds (a smoke test, not figures to compare).

Examples:
  go run ./bench/cmd/bench --quick
  go run ./bench/cmd/bench --wait-load 1.5 --append docs/bench-history.md   # the full table
  go run ./bench/cmd/bench --only B3 --cpuprofile b3.out            # profile one scenario

Flags:
`

// Main is the harness's command line: it parses args, runs Child or Run, prints
// the report on stdout and progress on stderr, and returns the exit code (0 ok,
// 1 error, 2 usage). self is the command line that re-executes this binary into
// Main (or into a Child call): the syncledger CLI passes its path and "bench".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, self []string) int {
	if ok, err := Child(ctx); ok {
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	var (
		cfg        = Config{Self: self, Log: stderr}
		only       string
		appendTo   string
		cpuprofile string
		memprofile string
	)
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, Usage)
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.Quick, "quick", false, "every scenario at a small size, few runs (CI smoke test)")
	fs.BoolVar(&cfg.Big, "big", false, "also B4 and B3 at 100,000 files, B12 at 1,000,000 (several more minutes)")
	fs.StringVar(&only, "only", "", "comma-separated scenario ids to run, e.g. B1,B4 (default: all)")
	fs.StringVar(&cfg.Scratch, "scratch", "", "directory for the run's scratch space (default /dev/shm if present, else the temp directory)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the scratch space after the run, and the run's objects on an S3 server given by SYNCLEDGER_TEST_S3_ENDPOINT")
	fs.StringVar(&cfg.S3, "s3", S3Auto, "S3 server: auto (SYNCLEDGER_TEST_S3_ENDPOINT if set, else start versitygw), versitygw, env, or fake (gofakes3 in this process)")
	fs.IntVar(&cfg.Runs, "runs", 0, "measured runs of the cold scenarios B4–B6 (default 7; quick 2) and of B10 (default 15)")
	fs.IntVar(&cfg.LargeMiB, "large-mib", 0, "size of B14's sparse file in MiB (default 256; quick 72); 10240 is issue 17's 10 GiB, with --scratch on a disk")
	fs.IntVar(&cfg.B9Commits, "b9-commits", 0, "commits in B9's log (default 1,000,000; quick 2,000)")
	fs.Float64Var(&cfg.WaitLoad, "wait-load", 0, "before starting, wait until the 1-minute load average is below this (0: don't wait)")
	fs.DurationVar(&cfg.WaitMax, "wait-max", 20*time.Minute, "longest wait for --wait-load; then run anyway, and the report says so")
	fs.StringVar(&cfg.Swamp, "swamp", "", "the swamp CLI for B10 (default $SYNCLEDGER_TEST_SWAMP; ../shared/tools/swamp/install.sh prints it); without it a full run leaves B10 out")
	fs.StringVar(&appendTo, "append", "", "also append the report to this file (e.g. docs/bench-history.md)")
	fs.StringVar(&cpuprofile, "cpuprofile", "", "write the harness process's CPU profile (the client side) to this file, and each B9 replay child's to this file.<mode>")
	fs.StringVar(&memprofile, "memprofile", "", "write the harness process's heap profile to this file each time its live heap passes its highest point so far by a tenth (what held the memory at the peak)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bench: %v (--help lists the flags)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if only != "" {
		cfg.Only = strings.Split(strings.ToUpper(only), ",")
		for _, id := range cfg.Only {
			if !slices.Contains(Scenarios, id) {
				fmt.Fprintf(stderr, "bench: --only %s: want some of %s\n", id, strings.Join(Scenarios, ","))
				return 2
			}
		}
	}
	cfg.Command = strings.TrimSpace("go run ./bench/cmd/bench " + strings.Join(args, " "))
	if cpuprofile != "" {
		cfg.ChildProfile = cpuprofile
		f, err := os.Create(cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if memprofile != "" {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go peakHeapProfile(pctx, memprofile)
	}
	rep, err := Run(ctx, cfg)
	if rep != nil && len(rep.Rows) > 0 {
		rep.Markdown(stdout)
		if appendTo != "" {
			if aerr := appendReport(appendTo, rep); aerr != nil && err == nil {
				err = aerr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// appendReport appends the report's Markdown to path.
func appendReport(path string, rep *Report) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("append report: %w", err)
	}
	fmt.Fprintln(f)
	rep.Markdown(f)
	if err := f.Close(); err != nil {
		return fmt.Errorf("append report: %w", err)
	}
	return nil
}

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/statedb"
)

// B11 and B12 measure whole processes of the syncledger CLI, as the swamp
// extension and scripts run it: start-up included. Their baseline is natsinfo
// (bench/cmd/natsinfo), the least a nats.go program does to ask the server what
// a no-op sync asks: connect, one STREAM.INFO, exit. The harness builds both
// binaries (go build, so it runs from the source tree) into the scratch space.

// ShippedTags are the build tags syncledger is built with for use (README,
// Dockerfile): they leave out the parts of the GCS client's gRPC transport the
// JSON API does not use (the storage client's disable_grpc_modules: xDS and
// its Envoy protobufs; gRPC's grpcnotrace: x/net/trace), whose package inits
// every command would otherwise pay at start (BENCHMARKS.md, B11).
const ShippedTags = "disable_grpc_modules,grpcnotrace"

// tools are the binaries B11 and B12 run.
type tools struct {
	syncledger, natsinfo string
}

// buildTools builds the CLI and the baseline once per run.
func (r *runner) buildTools(ctx context.Context) (*tools, error) {
	if r.tools != nil {
		return r.tools, nil
	}
	dir := r.e.path("bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	t := &tools{syncledger: filepath.Join(dir, "syncledger"), natsinfo: filepath.Join(dir, "natsinfo")}
	for out, pkg := range map[string]string{
		t.syncledger: "github.com/syncledger/syncledger/cmd/syncledger",
		t.natsinfo:   "github.com/syncledger/syncledger/bench/cmd/natsinfo",
	} {
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", ShippedTags, "-o", out, pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s (run the harness from the source tree): %v\n%s", pkg, err, b)
		}
		r.e.logf("bench: built %s in %s", filepath.Base(out), time.Since(t0).Round(time.Millisecond))
	}
	r.tools = t
	return t, nil
}

// procResult is one child process's run.
type procResult struct {
	wall, cpu time.Duration
	stdout    string
}

// rssRuns is how many runs of each command measure its peak RSS (under ptrace,
// apart from the timed runs).
const rssRuns = 3

// runProc runs a command to completion with env added to the harness's.
func runProc(ctx context.Context, env []string, args ...string) (procResult, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	res := procResult{wall: time.Since(t0), stdout: out.String()}
	res.cpu, _ = rusageOf(cmd.ProcessState) // its peak RSS is the harness's: see childPeakRSS
	if err != nil {
		return res, fmt.Errorf("%s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return res, nil
}

// procOp is one child process to measure, with a check of its output.
type procOp struct {
	s     *series
	prep  func() error
	args  []string
	check func(stdout string) error
}

// interleaveProcs runs warm rounds, then rounds measured rounds of ops, in
// order, like env.interleave: each sample is the child's wall time, its CPU
// time (and the NATS server's meanwhile) and its peak RSS.
func (r *runner) interleaveProcs(ctx context.Context, env []string, warm, rounds int, ops ...procOp) error {
	for i := range warm + rounds {
		for _, o := range ops {
			if o.prep != nil {
				if err := o.prep(); err != nil {
					return err
				}
			}
			n0 := procCPU(r.e.nats.pid)
			res, err := runProc(ctx, env, o.args...)
			if err != nil {
				return err
			}
			if o.check != nil {
				if err := o.check(res.stdout); err != nil {
					return fmt.Errorf("%s: %w", strings.Join(o.args, " "), err)
				}
			}
			if i >= warm {
				o.s.add(res.wall, 1, cpuSample{client: res.cpu, nats: procCPU(r.e.nats.pid) - n0}, 0)
			}
		}
	}
	for range rssRuns {
		for _, o := range ops {
			if o.prep != nil {
				if err := o.prep(); err != nil {
					return err
				}
			}
			cmd := exec.CommandContext(ctx, o.args[0], o.args[1:]...)
			cmd.Env = append(os.Environ(), env...)
			rss, err := childPeakRSS(cmd)
			if errors.Is(err, syscall.EPERM) {
				r.e.logf("bench: no peak RSS of child processes: ptrace is not permitted here (%v)", err)
				return nil
			}
			if err != nil {
				return err
			}
			o.s.peak, o.s.child = max(o.s.peak, rss), true
		}
	}
	return nil
}

// loadNote is the 1-minute load average now, for a row's note: engineers and
// CI share the machine the figures come from.
func loadNote() string { return fmt.Sprintf("load %.2f", loadAvg()[0]) }

// cliLedger makes a ledger and a cache through the CLI and returns the
// environment that points the CLI at them, the cache and the ledger.
func (r *runner) cliLedger(ctx context.Context, t *tools, stem string) (env []string, cache string, info ledger.Info, err error) {
	name := r.e.name(stem)
	cache = r.e.path("caches", name)
	env = []string{
		"SYNCLEDGER_NATS=" + r.e.natsURL, "SYNCLEDGER_LEDGER=" + name, "SYNCLEDGER_CACHE=" + cache,
		"SYNCLEDGER_HOST=bench", "SYNCLEDGER_LOG_LEVEL=warn", "SYNCLEDGER_CONFIG=/dev/null",
	}
	res, err := runProc(ctx, env, t.syncledger, "init", "--blobs", "file://"+r.e.path("blobs-"+name))
	if err != nil {
		return nil, "", info, err
	}
	info = ledger.Info{Name: name, UUID: strings.TrimSpace(res.stdout)}
	if err := ledger.ValidateUUID(info.UUID); err != nil {
		return nil, "", info, fmt.Errorf("init printed %q, want the ledger's uuid", res.stdout)
	}
	if err := os.MkdirAll(filepath.Join(cache, ledger.StateDir), 0o755); err != nil {
		return nil, "", info, err
	}
	return env, cache, info, nil
}

// b11: syncledger version and a no-op sync as whole processes, interleaved with
// natsinfo; the peak RSS of each.
func (r *runner) b11(ctx context.Context) error {
	t, err := r.buildTools(ctx)
	if err != nil {
		return err
	}
	env, cache, info, err := r.cliLedger(ctx, t, "b11")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cache, "f"), []byte("x"), 0o644); err != nil {
		return err
	}
	for _, cmd := range []string{"commit", "sync"} {
		if _, err := runProc(ctx, env, t.syncledger, cmd); err != nil {
			return err
		}
	}
	var sBase, sVersion, sSync series
	upToDate := func(out string) error {
		if !strings.HasPrefix(out, "up to date") {
			return fmt.Errorf("no-op sync printed %q", out)
		}
		return nil
	}
	load := loadNote()
	err = r.interleaveProcs(ctx, env, r.sz.noopWarm/5+1, r.sz.noopSamples/8+5,
		procOp{s: &sBase, args: []string{t.natsinfo, r.e.natsURL, ledger.StreamName(info.Name)}},
		procOp{s: &sVersion, args: []string{t.syncledger, "version"}},
		procOp{s: &sSync, args: []string{t.syncledger, "sync"}, check: upToDate},
	)
	if err != nil {
		return err
	}
	load += "–" + loadNote()[5:]
	const baseline = "natsinfo: a nats.go program that connects, sends 1 STREAM.INFO, exits (whole process)"
	// Targets: version, issue 17's; the no-op sync, issue 27's (which links the
	// official S3 and GCS clients into every command).
	for _, c := range []struct {
		s     *series
		name  string
		ratio float64
	}{{&sVersion, "syncledger version (whole process)", 1.5}, {&sSync, "no-op syncledger sync (whole process)", 3}} {
		row := latencyRow("B11", c.name, "1-file cache", c.s, &sBase, baseline)
		row.check(fmt.Sprintf("≤ %g× baseline", c.ratio), row.Ratio <= c.ratio)
		row.Note = fmt.Sprintf("%s; peak RSS %s, baseline's %s", load, fmtBytes(c.s.peak), fmtBytes(sBase.peak))
		r.add(row)
	}
	if sSync.peak == 0 {
		return nil // not measured (no ptrace)
	}
	rss := Row{ID: "B11", Scenario: "peak RSS of a no-op syncledger sync", Size: "1-file cache", Unit: "MiB", N: len(sSync.d),
		Median: float64(sSync.peak) / (1 << 20), Min: float64(sSync.peak) / (1 << 20), Max: float64(sSync.peak) / (1 << 20),
		Baseline: "natsinfo's peak RSS", Base: float64(sBase.peak) / (1 << 20), RSSOf: "child", PeakRSS: sSync.peak, Note: load}
	rss.Ratio = rss.Median / rss.Base
	rss.check("≤ 30 MiB", rss.Median <= 30) // issue 27's (issue 17's was 20 MiB)
	r.add(rss)
	return nil
}

// b12: commit of 1 changed file and a no-op commit as whole processes, on
// caches of 1k and 100k files (1M with --big) beside a running watch whose
// dirty set is trusted, then (the watch stopped) a sync applying 1 new event
// another host committed, each interleaved with natsinfo.
func (r *runner) b12(ctx context.Context) error {
	t, err := r.buildTools(ctx)
	if err != nil {
		return err
	}
	sizes := []int{1000, 100_000}
	switch {
	case r.cfg.Quick:
		sizes = []int{r.sz.files}
	case r.cfg.Big:
		sizes = append(sizes, 1_000_000)
	}
	var first b12First
	for _, n := range sizes {
		if err := r.b12At(ctx, t, n, &first); err != nil {
			return fmt.Errorf("%d files: %w", n, err)
		}
	}
	return nil
}

// b12First holds the first size's figures, which the larger sizes are
// compared with: the commits' medians and the sync's peak RSS.
type b12First struct {
	median  [2]float64
	syncRSS int64
}

func (r *runner) b12At(ctx context.Context, t *tools, n int, first *b12First) error {
	env, cache, info, err := r.cliLedger(ctx, t, fmt.Sprintf("b12-%d", n))
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	t0 := time.Now()
	if err := buildCache(cache, n, info); err != nil {
		return err
	}
	r.e.logf("bench: B12 cache of %d files and its index built in %s", n, time.Since(t0).Round(time.Millisecond))

	watch := exec.CommandContext(ctx, t.syncledger, "watch")
	watch.Env = append(os.Environ(), env...)
	var werr bytes.Buffer
	watch.Stderr = &werr
	if err := watch.Start(); err != nil {
		return err
	}
	defer func() {
		_ = watch.Process.Signal(syscall.SIGTERM)
		_ = watch.Wait()
	}()
	if err := waitDirty(ctx, cache); err != nil {
		return fmt.Errorf("%w; watch's stderr:\n%s", err, werr.String())
	}
	// The watch's set is trusted once a full scan was acked: the first commit.
	t0 = time.Now()
	if _, err := runProc(ctx, env, t.syncledger, "commit"); err != nil {
		return err
	}
	full := time.Since(t0)

	var sBase, sOne, sNoop series
	round := 0
	changeOne := func() error {
		round++
		p := filepath.Join(cache, filepath.FromSlash(filePath(round%layoutOf(n, 16).Models, 0)))
		return os.WriteFile(p, fmt.Appendf(nil, "change %d", round), 0o644)
	}
	committed := func(want string) func(string) error {
		return func(out string) error {
			if !strings.Contains(out, want) {
				return fmt.Errorf("printed %q, want %q", out, want)
			}
			return nil
		}
	}
	warm, rounds := r.sz.commitWarm, r.sz.commitSamples/2+5
	load := loadNote()
	// The baseline runs between the two commits: the watch reads each commit
	// back and takes the cache's lock a moment to see it is applied, and a
	// command that finds the lock taken waits for bbolt's next try (50 ms).
	err = r.interleaveProcs(ctx, env, warm, rounds,
		procOp{s: &sOne, prep: changeOne, args: []string{t.syncledger, "commit"}, check: committed("1 files written")},
		procOp{s: &sBase, args: []string{t.natsinfo, r.e.natsURL, ledger.StreamName(info.Name)}},
		procOp{s: &sNoop, args: []string{t.syncledger, "commit"}, check: committed("nothing to commit")},
	)
	if err != nil {
		return err
	}
	load += "–" + loadNote()[5:]
	const baseline = "natsinfo: connect, 1 STREAM.INFO, exit (whole process)"
	for i, c := range []struct {
		s    *series
		name string
	}{{&sOne, "commit of 1 changed file beside watch (whole process)"}, {&sNoop, "no-op commit beside watch (whole process)"}} {
		row := latencyRow("B12", c.name, sizeLabel(n)+" files", c.s, &sBase, baseline)
		note := fmt.Sprintf("%s; peak RSS %s; the full-scan commit that made the dirty set trusted took %s", load, fmtBytes(c.s.peak), full.Round(time.Millisecond))
		if first.median[i] == 0 {
			first.median[i] = row.Median
			row.check("≤ 20 ms", row.Median <= 20)
		} else {
			flat := row.Median / first.median[i]
			note += fmt.Sprintf("; %.2f× the first size's median", flat)
			row.check("≤ 20 ms and ≤ 1.5× the first size", row.Median <= 20 && flat <= 1.5)
		}
		row.Note = note
		r.add(row)
	}
	_ = watch.Process.Signal(syscall.SIGTERM)
	_ = watch.Wait()
	return r.b12Sync(ctx, t, n, env, info, first)
}

// b12Sync: a sync applying 1 new event, another host's commit of one file
// (made through the CLI on a small cache of its own before each run, not
// timed), on the cache of n index entries, interleaved with natsinfo. Its
// peak RSS must not grow with the index: at most 1.5× the first size's.
func (r *runner) b12Sync(ctx context.Context, t *tools, n int, env []string, info ledger.Info, first *b12First) error {
	if _, err := runProc(ctx, env, t.syncledger, "sync"); err != nil { // the commits' events, read back
		return err
	}
	writer := r.e.path("caches", info.Name+"-writer")
	if err := os.MkdirAll(writer, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(writer)
	wenv := append(slices.Clone(env), "SYNCLEDGER_CACHE="+writer, "SYNCLEDGER_HOST=bench-writer")
	round := 0
	commitOne := func() error {
		round++
		p := filepath.Join(writer, "data", "@test", "writer", modelID(0), "file.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "writer %d", round), 0o644); err != nil {
			return err
		}
		_, err := runProc(ctx, wenv, t.syncledger, "commit")
		return err
	}
	applied := func(out string) error {
		if !strings.Contains(out, "pulled 1 files") || !strings.Contains(out, "from 1 events") {
			return fmt.Errorf("printed %q, want 1 file pulled from 1 event", out)
		}
		return nil
	}
	var sBase, sSync series
	load := loadNote()
	err := r.interleaveProcs(ctx, env, r.sz.commitWarm, r.sz.commitSamples/2+5,
		procOp{s: &sSync, prep: commitOne, args: []string{t.syncledger, "sync"}, check: applied},
		procOp{s: &sBase, args: []string{t.natsinfo, r.e.natsURL, ledger.StreamName(info.Name)}},
	)
	if err != nil {
		return err
	}
	load += "–" + loadNote()[5:]
	row := latencyRow("B12", "sync applying 1 new event (whole process)", sizeLabel(n)+" index entries", &sSync, &sBase,
		"natsinfo: connect, 1 STREAM.INFO, exit (whole process)")
	row.Note = fmt.Sprintf("%s; peak RSS %s", load, fmtBytes(sSync.peak))
	if first.syncRSS == 0 {
		first.syncRSS = sSync.peak
		row.check("≤ 20 ms", row.Median <= 20)
	} else {
		grow := float64(sSync.peak) / float64(first.syncRSS)
		row.Note += fmt.Sprintf(", %.2f× the first size's", grow)
		row.check("≤ 20 ms and peak RSS ≤ 1.5× the first size's", row.Median <= 20 && grow <= 1.5)
	}
	r.add(row)
	return nil
}

// waitDirty waits until a watch's dirty set answers for cache.
func waitDirty(ctx context.Context, cache string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return dirty.NewClient(cache).Wait(ctx)
}

// buildCache writes n small files in the data set's layout and an index that
// matches them (size, mode, mtime): a synced cache of n files without
// committing them, which takes about 1 ms a file. The index's files are in no
// event: the ledger is empty, and each commit starts its partition.
func buildCache(dir string, n int, info ledger.Info) error {
	l := layoutOf(n, 16)
	db, err := statedb.Open(filepath.Join(dir, ledger.StateDir, "state.db"), time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	const perTx = 50_000
	for start := 0; start < l.Files(); start += perTx {
		err := db.Update(func(tx *statedb.Tx) error {
			for i := start; i < min(start+perTx, l.Files()); i++ {
				m, f := i/l.PerModel, i%l.PerModel
				rel := filePath(m, f)
				body := fmt.Appendf(nil, "%016d", i)[:l.Size]
				p := filepath.Join(dir, filepath.FromSlash(rel))
				if f == 0 {
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						return err
					}
				}
				if err := os.WriteFile(p, body, 0o644); err != nil {
					return err
				}
				mt := time.Unix(1700000000, int64(i))
				if err := os.Chtimes(p, mt, mt); err != nil {
					return err
				}
				e := statedb.Entry{Digest: ledger.DigestOf(body), Size: int64(len(body)), Mode: 0o644, MTime: mt}
				if err := tx.Put(rel, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("build cache: %w", err)
		}
	}
	return db.Update(func(tx *statedb.Tx) error { return tx.SetLedger(info.UUID, info.Name) })
}

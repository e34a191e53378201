package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/syncledger/syncledger/internal/agenttrace"
)

// b10 is what the @syncledger/datastore extension adds to one swamp command on
// a synced host: `swamp model method run vpc execute` (a command/shell model
// that echoes a value) in a repo whose datastore is the ledger, against the
// same command in a repo on swamp's filesystem datastore, interleaved, in the
// same run. The extension's run includes everything it does for the command:
// starting the agent, the lock requests, the full sync (nothing new: one
// request), the upload and the one commit of the run's files.
//
// It needs the swamp CLI (Config.Swamp) and builds the syncledger binary with
// the go command, so the harness must run in the module's source tree.
func (r *runner) b10(ctx context.Context) error {
	// Deno refuses paths under /dev: the repos and the binary live in the
	// system temp directory.
	base := os.TempDir()
	if strings.HasPrefix(base, "/dev/") {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "syncledger-bench-b10-")
	if err != nil {
		return err
	}
	if !r.cfg.Keep {
		r.closes = append(r.closes, func() { os.RemoveAll(dir) })
	}
	bin := filepath.Join(dir, "syncledger")
	if out, err := exec.CommandContext(ctx, "go", "build", "-tags", ShippedTags, "-o", bin, "github.com/syncledger/syncledger/cmd/syncledger").CombinedOutput(); err != nil {
		return fmt.Errorf("build syncledger (run the harness in the source tree): %v\n%s", err, out)
	}
	ledgerName := r.e.name("b10")
	sl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--nats", r.e.natsURL, "--ledger", ledgerName, "--log-level", "warn"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("syncledger %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := sl("init", "--blobs", "file://"+filepath.Join(dir, "blobs")); err != nil {
		return err
	}
	// The agent's requests are timed from outside it, in commands of their
	// own after the measured ones: this binary runs between swamp and the
	// agent (Child, package agenttrace).
	trace := filepath.Join(dir, "agent-trace.jsonl")
	self, err := agenttrace.Self(dir)
	if err != nil {
		return err
	}
	var traced []string // the environment of a traced command (nil: not traced)
	swamp := func(repo string, args ...string) error {
		if err := os.MkdirAll(repo, 0o755); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, r.cfg.Swamp, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"), "NO_COLOR=1", "TMPDIR="+dir)
		cmd.Env = append(cmd.Env, traced...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("swamp %s in %s: %v\n%s", strings.Join(args, " "), repo, err, out.String())
		}
		return nil
	}
	fsRepo, extRepo := filepath.Join(dir, "fs"), filepath.Join(dir, "ext")
	if err := swamp(fsRepo, "repo", "init", "--tool", "none"); err != nil {
		return err
	}
	if err := swamp(fsRepo, "model", "create", "command/shell", "vpc"); err != nil {
		return err
	}
	def := filepath.Join(fsRepo, "models", "command", "shell", "vpc.yaml")
	b, err := os.ReadFile(def)
	if err != nil {
		return err
	}
	run, _ := json.Marshal("echo vpc-0abc123")
	b = bytes.Replace(b, []byte("methods: {}"), []byte("methods:\n  execute:\n    arguments:\n      run: "+string(run)+"\n"), 1)
	if err := os.WriteFile(def, b, 0o644); err != nil {
		return err
	}
	if err := swamp(extRepo, "repo", "init", "--tool", "none"); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(fsRepo, "models"), extRepo).CombinedOutput(); err != nil {
		return fmt.Errorf("copy models: %v %s", err, out)
	}
	if err := sl("--host", "b10", "swamp", "setup", "--repo", extRepo, "--binary", bin); err != nil {
		return err
	}
	// A third repo on a datastore extension that does nothing: what swamp
	// itself spends on loading and driving any extension.
	nullRepo := filepath.Join(dir, "null")
	if err := swamp(nullRepo, "repo", "init", "--tool", "none"); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(fsRepo, "models"), nullRepo).CombinedOutput(); err != nil {
		return fmt.Errorf("copy models: %v %s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(nullRepo, "extensions", "datastores"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(nullRepo, "extensions", "datastores", "null.ts"), []byte(nullExtension), 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(nullRepo, ".swamp.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("datastore:\n  type: \"@bench/null\"\n  config: {}\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	var fsS, extS, nullS series
	var agentMS []float64 // per traced command: the sum of its agent requests' times
	requests, hints := 0, 0
	method := func(s *series, repo string) op {
		return op{s: s, run: wrap(func() error { return swamp(repo, "model", "method", "run", "vpc", "execute") })}
	}
	// traceOne runs the extension's command once, traced.
	traceOne := func() error {
		if err := os.WriteFile(trace, nil, 0o644); err != nil {
			return err
		}
		traced = agenttrace.Env(self, bin, trace)
		err := swamp(extRepo, "model", "method", "run", "vpc", "execute")
		traced = nil
		if err != nil {
			return err
		}
		b, err := os.ReadFile(trace)
		if err != nil {
			return err
		}
		total, n, h := 0.0, 0, 0
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var rec struct {
				Op string
				MS float64
			}
			switch {
			case json.Unmarshal(line, &rec) != nil:
			case rec.Op == "hint": // no answer: its work runs beside swamp
				h++
			default:
				total += rec.MS
				n++
			}
		}
		agentMS, requests, hints = append(agentMS, total), n, h
		return nil
	}
	warm, rounds := 2, 15
	if r.cfg.Quick {
		warm, rounds = 1, 2
	}
	if r.cfg.Runs > 0 {
		rounds = r.cfg.Runs
	}
	if err := r.e.interleave(ctx, warm, rounds, method(&fsS, fsRepo), method(&nullS, nullRepo), method(&extS, extRepo)); err != nil {
		return err
	}
	for range max(rounds/3, 1) {
		if err := traceOne(); err != nil {
			return err
		}
	}
	agentMed, _, _, _ := stats(agentMS)
	row := latencyRow("B10", "swamp model method run, extension vs filesystem datastore", "1 model", &extS, &fsS,
		"the same swamp command on swamp's filesystem datastore")
	added := row.Median - row.Base
	nullMed, _, _, _ := stats(nullS.ms())
	// Each round runs the three commands back to back: the round's own
	// difference is less exposed to the machine's load drifting.
	fsMS, extMS := fsS.ms(), extS.ms()
	var diffs []float64
	for i := range min(len(fsMS), len(extMS)) {
		diffs = append(diffs, extMS[i]-fsMS[i])
	}
	pairedMed, _, _, _ := stats(diffs)
	row.Note = fmt.Sprintf("the extension adds %.0f ms (median %.0f vs %.0f ms; median of the rounds' own differences: %+.0f ms). A datastore extension that does nothing, in the same run: %.0f ms (%+.0f ms: swamp loading and driving any extension). Its %d agent requests take %.1f ms per command (median of their sums over traced commands run after the measured ones, timed on swamp's side of the agent's pipe: the agent's own part swamp waits for; the rest is the agent's start, its background work beside swamp — the scan after the pull, %d markDirty hints' uploads and fsyncs — and noise). CPU is the harness's, not swamp's",
		added, row.Median, row.Base, pairedMed, nullMed, nullMed-row.Base, requests, agentMed, hints)
	row.check("adds ≤ 50 ms", added <= 50)
	r.add(row)
	return nil
}

// swampPath is the swamp CLI B10 runs: Config.Swamp, else SYNCLEDGER_TEST_SWAMP.
func swampPath(cfg Config) string {
	if cfg.Swamp != "" {
		return cfg.Swamp
	}
	return os.Getenv("SYNCLEDGER_TEST_SWAMP")
}

// b10Skipped says why B10 did not run in a run of every scenario.
const b10Skipped = "B10 (swamp) not run: it needs the swamp CLI (--swamp PATH, or SYNCLEDGER_TEST_SWAMP; ../shared/tools/swamp/install.sh prints it)"

// nullExtension is a swamp datastore extension that does nothing: B10's second
// baseline.
const nullExtension = `import { z } from "npm:zod@4";
class Lock { async acquire() {} async release() {} async withLock(f) { return await f(); } async inspect() { return null; } async forceRelease() { return false; } }
class Sync { async pullChanged() { return 0; } async pushChanged() { return 0; } async markDirty() {} }
export const datastore = {
  type: "@bench/null", name: "null", description: "does nothing", configSchema: z.object({}),
  createProvider(_config) {
    return {
      resolveDatastorePath: (repo) => repo + "/.swamp", resolveCachePath: (_repo) => undefined,
      createSyncService: () => new Sync(), createLock: () => new Lock(),
      createVerifier: () => ({ verify: async () => ({ healthy: true, message: "", latencyMs: 0, datastoreType: "@bench/null" }) }),
    };
  },
};
`

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/embedded"
	"github.com/syncledger/syncledger/internal/agenttrace"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// The harness runs parts of itself in child processes, started by re-executing
// its own binary (Config.Self) with childEnv set to a JSON childSpec:
//
//   - "nats": the embedded NATS server, so that its CPU time is counted apart
//     from the client's and the client's profile holds only client code;
//   - "replay": one B9 run (a lazy full sync, a snapshot replay, or the raw
//     ordered-consumer read), so that its peak RSS is that of a process doing
//     only that.
//
// A child writes one line "BENCHCHILD <json childResult>" on stdout.

const (
	childEnv    = "SYNCLEDGER_BENCH_CHILD"
	childMarker = "BENCHCHILD "
)

type childSpec struct {
	Role   string `json:"role"`             // "nats" or "replay"
	Dir    string `json:"dir,omitempty"`    // nats: data directory
	NATS   string `json:"nats,omitempty"`   // replay: server URL
	Ledger string `json:"ledger,omitempty"` // replay: ledger name
	Cache  string `json:"cache,omitempty"`  // replay: cache directory
	Blobs  string `json:"blobs,omitempty"`  // replay: file blob store directory
	Mode   string `json:"mode,omitempty"`   // replay: replayLazySync, replayBuild or replayRaw
	N      int    `json:"n,omitempty"`      // replay: events expected
	// CPUProfile, when set, is where a replay child writes its CPU profile.
	CPUProfile string `json:"cpuProfile,omitempty"`
}

type childResult struct {
	URL     string        `json:"url,omitempty"`
	Elapsed time.Duration `json:"elapsed,omitempty"`
	Events  int           `json:"events,omitempty"`
	PeakRSS int64         `json:"peakRSS,omitempty"` // VmHWM at the end, bytes
	Err     string        `json:"err,omitempty"`
}

// B9 replay modes.
const (
	replayLazySync = "sync-lazy" // host.Sync with Lazy: the index and marks persisted, no blob fetched
	replayBuild    = "build"     // snapshot.Build: the state in memory only
	replayRaw      = "raw"       // ordered consumer, no decoding: the raw baseline
)

// Child runs this process as one of the harness's child processes when the
// environment says so (see Config.Self), and reports whether it did. A binary
// that embeds the harness calls it first thing: the syncledger CLI from its
// bench command, the bench package's tests from TestMain.
//
// It also runs this process as B10's agent tracer (package agenttrace) when
// the environment says so, and then exits with the agent's exit code.
func Child(ctx context.Context) (bool, error) {
	if ran, code := agenttrace.Main(); ran {
		os.Exit(code)
	}
	raw := os.Getenv(childEnv)
	if raw == "" {
		return false, nil
	}
	var sp childSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		return true, fmt.Errorf("bench child: %s: %w", childEnv, err)
	}
	var (
		res childResult
		err error
	)
	switch sp.Role {
	case "nats":
		err = natsChild(sp)
		return true, err
	case "replay":
		res, err = replayChild(ctx, sp)
	default:
		err = fmt.Errorf("bench child: unknown role %q", sp.Role)
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.PeakRSS = peakRSS()
	writeChildResult(os.Stdout, res)
	return true, err
}

func writeChildResult(w io.Writer, res childResult) {
	b, _ := json.Marshal(res)
	fmt.Fprintf(w, "%s%s\n", childMarker, b)
}

// natsChild runs the embedded server until its stdin closes (the harness ended).
func natsChild(sp childSpec) error {
	srv, err := embedded.Start(embedded.Config{Listen: "127.0.0.1:0", DataDir: sp.Dir, ServerName: "bench"})
	if err != nil {
		writeChildResult(os.Stdout, childResult{Err: err.Error()})
		return err
	}
	writeChildResult(os.Stdout, childResult{URL: srv.ClientURL()})
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Shutdown()
	return nil
}

// replayChild runs one B9 run and reports its duration.
func replayChild(ctx context.Context, sp childSpec) (childResult, error) {
	var res childResult
	nc, err := nats.Connect(sp.NATS, nats.Name("syncledger-bench-replay"))
	if err != nil {
		return res, err
	}
	defer nc.Close()
	lg, err := natsjs.OpenLog(ctx, nc, sp.Ledger)
	if err != nil {
		return res, err
	}
	if sp.CPUProfile != "" {
		f, err := os.Create(sp.CPUProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	switch sp.Mode {
	case replayRaw:
		res.Events, err = rawOrderedRead(ctx, nc, lg.Stream(), 1, sp.N)
	case replayLazySync:
		res.Events, err = lazySync(ctx, lg, sp)
	case replayBuild:
		res.Events, err = buildSnapshot(ctx, lg, sp)
	default:
		err = fmt.Errorf("unknown replay mode %q", sp.Mode)
	}
	res.Elapsed = time.Since(t0)
	if err == nil && res.Events != sp.N {
		err = fmt.Errorf("%s: %d events read, want %d", sp.Mode, res.Events, sp.N)
	}
	return res, err
}

func lazySync(ctx context.Context, lg ledger.CommitLog, sp childSpec) (int, error) {
	objs, err := fileblob.New(fileblob.Config{Dir: sp.Blobs})
	if err != nil {
		return 0, err
	}
	h, err := host.Open(host.Config{Cache: sp.Cache, Host: "replay", Log: lg, Blobs: ledger.NewBucket(objs, ledger.RetryPolicy{})})
	if err != nil {
		return 0, err
	}
	defer h.Close()
	r, err := h.Sync(ctx, host.SyncOptions{Lazy: true})
	if err == nil && r.Written > 0 {
		err = fmt.Errorf("lazy sync wrote %d files: not metadata-only", r.Written)
	}
	return r.Events, err
}

// buildSnapshot replays the log into a state in memory (snapshot.Build: the
// projector core, no persistence, no file).
func buildSnapshot(ctx context.Context, lg ledger.CommitLog, sp childSpec) (int, error) {
	objs, err := fileblob.New(fileblob.Config{Dir: sp.Blobs})
	if err != nil {
		return 0, err
	}
	s, err := snapshot.Build(ctx, snapshot.BuildConfig{Log: lg, Blobs: ledger.NewBucket(objs, noRetry)})
	if err != nil {
		return 0, err
	}
	return int(s.Seq), nil
}

// rawOrderedRead reads n messages from seq from with an ordered consumer,
// without decoding them: the raw JetStream read rate.
func rawOrderedRead(ctx context.Context, nc *nats.Conn, stream string, from, n int) (int, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: uint64(from),
	})
	if err != nil {
		return 0, err
	}
	it, err := c.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	got := 0
	for got < n {
		if _, err := it.Next(jetstream.NextContext(ctx)); err != nil {
			return got, err
		}
		got++
	}
	return got, nil
}

// child is a started child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

// startChild starts a child process for sp, its stdout piped for the result.
func (e *env) startChild(sp childSpec) (*child, error) {
	spec, _ := json.Marshal(sp)
	cmd := exec.Command(e.cfg.Self[0], e.cfg.Self[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = &prefixWriter{w: e.cfg.Log, prefix: "bench child " + sp.Role + ": "}
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s child (%s): %w", sp.Role, e.cfg.Self[0], err)
	}
	return &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}, nil
}

// result reads the child's result line.
func (c *child) result() (childResult, error) {
	for {
		line, err := c.out.ReadString('\n')
		if rest, ok := strings.CutPrefix(line, childMarker); ok {
			var res childResult
			if err := json.Unmarshal([]byte(rest), &res); err != nil {
				return res, fmt.Errorf("child result %q: %w", rest, err)
			}
			if res.Err != "" {
				return res, errors.New(res.Err)
			}
			return res, nil
		}
		if err != nil {
			return childResult{}, fmt.Errorf("child pid %d ended without a result (is Config.Self a binary that calls bench.Child?): %w", c.pid, err)
		}
	}
}

// runChild runs a child to completion and returns its result with its CPU time
// and peak RSS as wait4 reports them.
func (e *env) runChild(sp childSpec) (childResult, time.Duration, int64, error) {
	c, err := e.startChild(sp)
	if err != nil {
		return childResult{}, 0, 0, err
	}
	c.stdin.Close()
	res, rerr := c.result()
	_, _ = io.Copy(io.Discard, c.out)
	werr := c.cmd.Wait()
	cpu, rss := rusageOf(c.cmd.ProcessState)
	if rerr != nil {
		return res, cpu, rss, rerr
	}
	if werr != nil {
		return res, cpu, rss, fmt.Errorf("%s child: %w", sp.Role, werr)
	}
	return res, cpu, rss, nil
}

// prefixWriter prefixes each line written to w.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    bytes.Buffer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf.Write(b)
	for {
		i := bytes.IndexByte(p.buf.Bytes(), '\n')
		if i < 0 {
			return len(b), nil
		}
		if p.w != nil {
			fmt.Fprintf(p.w, "%s%s", p.prefix, p.buf.Next(i+1))
		} else {
			p.buf.Next(i + 1)
		}
	}
}

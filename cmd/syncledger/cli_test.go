package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// cliEnv is a clean environment for the binary: none of the caller's
// SYNCLEDGER_* or NATS_* settings (NATS_URL, NATS_CREDS, NATS_USER, …) leak into
// a test, nor a configuration file under the caller's XDG_CONFIG_HOME or HOME.
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SYNCLEDGER_") || strings.HasPrefix(kv, "NATS_") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "XDG_CONFIG_HOME="+filepath.Join(os.TempDir(), "syncledger-test-no-config"))
	return append(env, extra...)
}

type result struct {
	stdout, stderr string
	code           int
}

// cli runs the binary to completion.
func cli(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return cliIn(t, "", env, args...)
}

// cliIn runs the binary to completion in the working directory dir ("": the
// test's).
func cliIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return cliBin(t, binPath, dir, env, args...)
}

// cliBin runs the binary bin (this build's, or another release's) to
// completion in dir.
func cliBin(t *testing.T, bin, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run syncledger %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// proc is a running syncledger process whose stdout lines are collected.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProcBin(t, binPath, env, args...)
}

// startProcBin starts the binary bin (this build's, or another release's).
func startProcBin(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), lines: make(chan string, 1000), stderr: new(bytes.Buffer), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// line waits for the next stdout line matching re.
func (p *proc) line(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("%s exited (%v) before printing %q; stderr:\n%s", p.cmd.Args, p.err, re, p.stderr)
			}
			if rx.MatchString(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("%s: no line matching %q after 30s; stderr:\n%s", p.cmd.Args, re, p.stderr)
		}
	}
}

// stop sends sig and returns the exit code.
func (p *proc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit on %v", p.cmd.Args, sig)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("%s: %v", p.cmd.Args, p.err)
	}
	return 0
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var urlRE = regexp.MustCompile(`nats://127\.0\.0\.1:\d+`)

// serveT starts `syncledger serve` on a free loopback port and returns it with
// its client URL and the default ledger's UUID.
func serveT(t *testing.T, data string, extra ...string) (p *proc, url, uuid string) {
	t.Helper()
	p = startProc(t, cliEnv(), append([]string{"serve", "--listen", "127.0.0.1:0", "--data", data}, extra...)...)
	url = urlRE.FindString(p.line(t, `listening on nats://`))
	m := regexp.MustCompile(`ledger\s+default\s+uuid (\S+)\s+blobs (\S+)`).FindStringSubmatch(p.line(t, `^\s+ledger`))
	if m == nil {
		t.Fatal("serve did not print the ledger")
	}
	if want := fileURL(filepath.Join(data, "blobs")); m[2] != want {
		t.Errorf("default ledger blobs %s, want %s", m[2], want)
	}
	p.line(t, `Stop with Ctrl-C`)
	return p, url, m[1]
}

func appendT(t *testing.T, l *natsjs.Log, uuid, host, msg string, heads map[string]ledger.Record, entries ...ledger.Entry) {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	byPart := map[string][]ledger.Entry{}
	var order []string
	for _, e := range entries {
		p := ledger.PartitionKey(e.Path)
		if byPart[p] == nil {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], e)
	}
	var evs []ledger.Event
	for i, p := range order {
		h := heads[p]
		evs = append(evs, ledger.Event{V: ledger.FormatVersion, Ledger: uuid, Commit: id, Host: host,
			At: time.Now(), Message: msg, Partition: p, ModelSeq: h.Event.ModelSeq + 1, Prev: h.Seq,
			Parts: len(order), Part: i + 1, Entries: byPart[p]})
	}
	seqs, err := l.Append(t.Context(), evs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	for i, e := range evs {
		heads[e.Partition] = ledger.Record{Seq: seqs[i], Event: e}
	}
}

func file(path, content string) ledger.Entry {
	return ledger.Entry{Path: path, SHA256: ledger.DigestOf([]byte(content)), Size: int64(len(content)), Mode: 0o644}
}

func TestServeInitLog(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv, url, uuid := serveT(t, data)
	env := cliEnv("SYNCLEDGER_NATS=" + url)

	// init is idempotent: the default ledger serve created, and a new one twice.
	if r := cli(t, env, "init"); r.code != 0 || strings.TrimSpace(r.stdout) != uuid {
		t.Fatalf("init on the default ledger: exit %d, stdout %q (want %s), stderr %s", r.code, r.stdout, uuid, r.stderr)
	}
	r1 := cli(t, env, "--ledger", "second", "init")
	r2 := cli(t, env, "--ledger", "second", "init")
	if r1.code != 0 || r2.code != 0 || r1.stdout != r2.stdout || ledger.ValidateUUID(strings.TrimSpace(r1.stdout)) != nil {
		t.Fatalf("init twice: %+v / %+v", r1, r2)
	}
	if r := cli(t, env, "--ledger", "second", "init", "--blobs", "file:///elsewhere"); r.code != 1 || !strings.Contains(r.stderr, "exists with blob store") {
		t.Errorf("init with another blob store: %+v", r)
	}

	// log on an empty ledger prints nothing.
	for _, args := range [][]string{{"log"}, {"log", "--json"}} {
		if r := cli(t, env, args...); r.code != 0 || r.stdout != "" {
			t.Fatalf("%v on an empty ledger: %+v", args, r)
		}
	}
	if r := cli(t, env, "--ledger", "missing", "log"); r.code != 1 || !strings.Contains(r.stderr, "syncledger: open ledger \"missing\"") ||
		!strings.Contains(r.stderr, "create it with `syncledger init`") {
		t.Errorf("log of a missing ledger: %+v", r)
	}

	// Commits through the Go API, read back through the CLI.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := natsjs.OpenLog(t.Context(), nc, "default")
	if err != nil {
		t.Fatal(err)
	}
	heads := map[string]ledger.Record{}
	vpc := "data/aws/ec2/vpc/abc/state/1/raw"
	appendT(t, l, uuid, "writer", "vpc", heads, file(vpc, "v1"), file("data/aws/ec2/vpc/abc/state/1/meta", "m"))
	appendT(t, l, uuid, "writer", "two models\nand a newline", heads, file("audit/run.json", "{}"), file("data/command/shell/c1/state/1/raw", "c"))

	r := cli(t, env, "log")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("log: exit %d, %d lines:\n%s\n%s", r.code, len(lines), r.stdout, r.stderr)
	}
	for i, want := range []*regexp.Regexp{
		regexp.MustCompile(`^\s+1  \d{4}-\d\d-\d\dT\S+Z  writer  \S{36}  data--aws--ec2--vpc--abc  2 files  vpc$`),
		regexp.MustCompile(`^\s+3  \S+  writer  \S{36}  audit,data--command--shell--c1  2 files  two models and a newline$`),
	} {
		if !want.MatchString(lines[i]) {
			t.Errorf("log line %d: %q does not match %s", i+1, lines[i], want)
		}
	}

	r = cli(t, env, "log", "--json")
	jl := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(jl) != 3 {
		t.Fatalf("log --json: exit %d, %d lines:\n%s", r.code, len(jl), r.stdout)
	}
	for i, line := range jl {
		var v struct {
			Seq   uint64          `json:"seq"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Seq != uint64(i+1) {
			t.Fatalf("log --json line %d: %q: %v", i+1, line, err)
		}
		if _, err := ledger.DecodeEvent(v.Event); err != nil {
			t.Errorf("log --json line %d: event does not decode: %v", i+1, err)
		}
	}

	// Scoped: by partition and by model; a partial commit shows "(k of n)".
	r = cli(t, env, "log", "--partition", "audit")
	if r.code != 0 || !regexp.MustCompile(`^\s+2  .*  audit \(1 of 2\)  1 file  two models`).MatchString(r.stdout) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("log --partition audit: %+v", r)
	}
	r = cli(t, env, "log", "--model", "AWS::EC2::VPC:abc", "--json")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, `"seq":1,`) {
		t.Errorf("log --model: %+v", r)
	}
	if r = cli(t, env, "log", "--from", "3"); r.code != 0 || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("log --from 3: %+v", r)
	}

	// --follow prints what arrives, and Ctrl-C ends it with exit 0.
	f := startProc(t, env, "log", "--follow", "--from", "4")
	appendT(t, l, uuid, "other", "followed", heads, file(vpc, "v2"))
	if got := f.line(t, `followed`); !strings.Contains(got, "  other  ") {
		t.Errorf("follow line %q", got)
	}
	if code := f.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("log --follow exit %d after SIGINT; stderr %s", code, f.stderr)
	}

	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exit %d after SIGTERM; stderr %s", code, srv.stderr)
	}
	// Stopped cleanly: the lock is free and the data survives a restart.
	srv2, url2, uuid2 := serveT(t, data)
	if uuid2 != uuid {
		t.Errorf("restart: default ledger uuid %s, want %s", uuid2, uuid)
	}
	if r := cli(t, cliEnv("SYNCLEDGER_NATS="+url2), "log"); r.code != 0 || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("log after restart: %+v", r)
	}
	srv2.stop(t, syscall.SIGINT)
}

func TestServeSecondOnSameDataDir(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	first, _, _ := serveT(t, data)
	r := cli(t, cliEnv(), "serve", "--listen", "127.0.0.1:0", "--data", data)
	want := fmt.Sprintf("syncledger: start server: data directory %s is in use by pid %d", data, first.cmd.Process.Pid)
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("second serve: exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
}

func TestServeRefusesNonLoopbackWithoutAuth(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	r := cli(t, cliEnv(), "serve", "--listen", "0.0.0.0:0", "--data", data)
	if r.code != exitUsage || !strings.Contains(r.stderr, "refusing to serve without authentication on 0.0.0.0:0") ||
		!strings.Contains(r.stderr, "--token") {
		t.Errorf("serve on 0.0.0.0 without auth: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(data, "jetstream")); !os.IsNotExist(err) {
		t.Errorf("refused serve created a store (%v)", err)
	}

	// With a token it serves; clients need the token in their URL.
	p := startProc(t, cliEnv("SYNCLEDGER_SERVE_TOKEN=s3cret"), "serve", "--listen", "0.0.0.0:0", "--data", data)
	url := urlRE.FindString(p.line(t, `listening on nats://`))
	p.line(t, `export SYNCLEDGER_NATS=nats://TOKEN@127\.0\.0\.1`)
	p.line(t, `Stop with Ctrl-C`)
	if r := cli(t, cliEnv("SYNCLEDGER_NATS="+url), "log"); r.code != 1 || !strings.Contains(r.stderr, "connect to NATS") {
		t.Errorf("log without the token: %+v", r)
	}
	authed := strings.Replace(url, "nats://", "nats://s3cret@", 1)
	if r := cli(t, cliEnv("SYNCLEDGER_NATS="+authed), "log"); r.code != 0 {
		t.Errorf("log with the token: %+v", r)
	}
	p.stop(t, syscall.SIGTERM)
}

func TestTruncatedLogExits4(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	_, url, _ := serveT(t, data)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := natsjs.CreateLog(t.Context(), nc, natsjs.LedgerConfig{Name: "short", Blobs: "file:///b", MaxAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	heads := map[string]ledger.Record{}
	appendT(t, l, info.UUID, "h", "old", heads, file("audit/a", "a"))
	appendT(t, l, info.UUID, "h", "old", heads, file("audit/b", "b"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := l.Bounds(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if b.First > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events did not expire: bounds %+v", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := cli(t, cliEnv("SYNCLEDGER_NATS="+url, "SYNCLEDGER_LEDGER=short"), "log", "--from", "1")
	if r.code != exitRebuild || !strings.Contains(r.stderr, "snapshot") {
		t.Errorf("log --from 1 of a truncated ledger: %+v; want exit %d", r, exitRebuild)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	env := cliEnv("SYNCLEDGER_NATS=nats://127.0.0.1:1") // nothing listens on port 1
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"log"}, 1, "syncledger: connect to NATS at nats://127.0.0.1:1"},
		{[]string{"init"}, 1, "syncledger: connect to NATS"},
		{[]string{"nosuch"}, 2, `syncledger: unknown command "nosuch"`},
		{[]string{"log", "--model", "nocolon"}, 2, "want TYPE:ID"},
		{[]string{"log", "extra"}, 2, "unknown command"},
		{[]string{"init", "--replicas", "9"}, 2, "--replicas 9"},
		{[]string{"serve", "--listen", "nohostport"}, 2, "want host:port"},
	} {
		r := cli(t, env, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	// Every command has --help.
	helps := [][]string{{"--help"}}
	for _, c := range newRootCmd(newApp(nil, nil, os.Getenv)).Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			helps = append(helps, []string{c.Name(), "--help"})
		}
	}
	if len(helps) < 5 {
		t.Fatalf("only %d commands registered", len(helps)-1)
	}
	for _, args := range helps {
		if r := cli(t, env, args...); r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if r := cli(t, env, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "syncledger ") {
		t.Errorf("version: %+v", r)
	}
}

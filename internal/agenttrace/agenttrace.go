// Package agenttrace times a swamp agent's requests from outside the agent:
// it runs as the binary the @syncledger/datastore extension starts
// (SYNCLEDGER_BINARY), starts the real syncledger with the same arguments,
// passes the JSON-lines exchange through both ways, and writes one line per
// request to a trace file: its op, when it was sent (Unix ms), how long its
// answer took, and whether it was an error —
//
//	{"op":"pull","at":1796146563.1,"ms":2.1,"ok":true}
//
// A hint gets no answer: its line has ms 0. The close request at swamp's exit
// goes over the agent's FIFOs, not this pipe, and is not traced. The times
// include the pipe's hop through this process (well under a millisecond).
//
// B10 (package bench) and the real-swamp tests use it; the product knows
// nothing of it.
package agenttrace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The environment that makes a binary calling Main the tracer: BinEnv names
// the real syncledger, OutEnv the trace file (appended to).
const (
	BinEnv = "SYNCLEDGER_AGENTTRACE_BIN"
	OutEnv = "SYNCLEDGER_AGENTTRACE_OUT"
)

// Env returns the environment entries that make self (a binary calling Main
// first thing) trace the agents it is started as, for the real binary bin,
// into trace; SYNCLEDGER_BINARY=self makes the extension start it.
func Env(self, bin, trace string) []string {
	return []string{"SYNCLEDGER_BINARY=" + self, BinEnv + "=" + bin, OutEnv + "=" + trace}
}

// Self copies this binary into dir and returns the copy's path, for Env:
// Deno refuses to start a binary under /dev (a test binary built in
// TMPDIR=/dev/shm).
func Self(dir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "agenttrace")
	if out, err := exec.Command("cp", exe, dst).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %v: %s", exe, err, out)
	}
	return dst, nil
}

// Main runs this process as the tracer when BinEnv is set, and reports
// whether it did and the exit code to end with: the agent's.
func Main() (ran bool, code int) {
	bin := os.Getenv(BinEnv)
	if bin == "" {
		return false, 0
	}
	fail := func(err error) (bool, int) {
		fmt.Fprintln(os.Stderr, "agenttrace:", err)
		return true, 1
	}
	f, err := os.OpenFile(os.Getenv(OutEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	// SIGINT is swamp's to handle (the agent ignores it too); SIGTERM goes on
	// to the agent.
	signal.Ignore(os.Interrupt)
	cmd := exec.Command(bin, os.Args[1:]...)
	cmd.Env = os.Environ()
	cmd.Stderr = os.Stderr
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		for s := range term {
			if cmd.Process != nil {
				_ = cmd.Process.Signal(s)
			}
		}
	}()
	err = Proxy(cmd, os.Stdin, os.Stdout, f)
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return true, ee.ExitCode()
	}
	if err != nil {
		return fail(err)
	}
	return true, 0
}

// Proxy runs cmd (an agent) with in as its input and out as its output, and
// writes the trace of the exchange to trace. It returns once the agent has
// exited and its output is passed on.
func Proxy(cmd *exec.Cmd, in io.Reader, out io.Writer, trace io.Writer) error {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	t := &tracer{w: trace, sent: map[int64]sent{}}
	go func() {
		defer stdin.Close() // swamp's end closed: the agent's input ends too
		lines(in, func(line []byte) error {
			t.request(line)
			_, err := stdin.Write(line)
			return err
		})
	}()
	copied := lines(stdout, func(line []byte) error {
		t.answer(line)
		_, err := out.Write(line)
		return err
	})
	if err := cmd.Wait(); err != nil {
		return err
	}
	return copied
}

// lines calls fn with each line of r, its newline kept, until r ends.
func lines(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if werr := fn(line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type sent struct {
	op string
	at time.Time
}

type tracer struct {
	mu   sync.Mutex
	w    io.Writer
	sent map[int64]sent
}

type message struct {
	ID    int64           `json:"id"`
	Op    string          `json:"op"`
	Error json.RawMessage `json:"error"`
}

func (t *tracer) request(line []byte) {
	var m message
	if json.Unmarshal(bytes.TrimSpace(line), &m) != nil || m.Op == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.ID == 0 { // a hint: no answer
		t.write(m.Op, now, 0, true)
		return
	}
	t.sent[m.ID] = sent{m.Op, now}
}

func (t *tracer) answer(line []byte) {
	var m message
	if json.Unmarshal(bytes.TrimSpace(line), &m) != nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sent[m.ID]
	if !ok {
		return
	}
	delete(t.sent, m.ID)
	t.write(s.op, s.at, now.Sub(s.at), len(m.Error) == 0 || string(m.Error) == "null")
}

func (t *tracer) write(op string, at time.Time, took time.Duration, ok bool) {
	fmt.Fprintf(t.w, "{\"op\":%q,\"at\":%.3f,\"ms\":%.3f,\"ok\":%v}\n",
		op, float64(at.UnixMicro())/1000, float64(took)/float64(time.Millisecond), ok)
}

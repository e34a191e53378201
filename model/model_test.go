// Package model holds the Promela model of syncledger's sync protocol
// (syncledger.pml) and its spin check (check.sh): see RELIABILITY.md, "Model
// check". Its only Go code is the test that runs the check.
package model

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestSpinModel runs check.sh: spin searches the model exhaustively for
// violations of I1, I2, I3 and I8 (and deadlocks) within the bounds check.sh
// states, probes that the search reaches the situations the model is meant to
// cover, and requires the broken variant (swamp-club#3193: the HWM taken from
// the log's head after a scoped sync) to fail with a trail. It needs spin and
// gcc and takes a few minutes, so it runs only with SYNCLEDGER_TEST_SPIN=1.
func TestSpinModel(t *testing.T) {
	if os.Getenv("SYNCLEDGER_TEST_SPIN") == "" {
		t.Skip("the spin model check runs with SYNCLEDGER_TEST_SPIN=1 (needs spin and gcc; about 3 minutes): " +
			"SYNCLEDGER_TEST_SPIN=1 go test -count=1 -run '^TestSpinModel$' -v ./model/")
	}
	for _, tool := range []string{"spin", "gcc", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("SYNCLEDGER_TEST_SPIN is set but %s is missing (Debian: apt-get install -y spin gcc): %v", tool, err)
		}
	}

	var out bytes.Buffer
	w := &lineLog{t: t, all: &out}
	cmd := exec.CommandContext(t.Context(), "bash", "check.sh")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	w.flush()
	if err != nil {
		t.Fatalf("model/check.sh: %v", err)
	}
	text := out.String()
	for _, want := range []string{
		"spin A: 0 errors, exhaustive:",
		"spin B: 0 errors, exhaustive:",
		"probes: 11/11 situations reached",
		"broken variant: counterexample found",
		"model check: OK",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("model/check.sh output lacks %q", want)
		}
	}
}

// lineLog logs what the script prints, a line at a time, as it comes.
type lineLog struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
	all *bytes.Buffer
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(string(l.buf))
		l.buf = nil
	}
}

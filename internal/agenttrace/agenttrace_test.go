package agenttrace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/internal/testmain"
)

// TestMain is also the fake agent the tests trace: it answers each request
// with an id, an error for op "bad", and ignores the rest.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTTRACE_FAKE_AGENT") == "" {
		testmain.Main(m)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var req message
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == 0 {
			continue
		}
		if req.Op == "bad" {
			fmt.Printf("{\"id\":%d,\"error\":{\"kind\":\"error\",\"message\":\"no\"}}\n", req.ID)
		} else {
			fmt.Printf("{\"id\":%d,\"result\":true}\n", req.ID)
		}
	}
	os.Exit(3)
}

// The exchange passes through unchanged; every request is traced once, in
// with its op and outcome; a hint with ms 0; the agent's
// exit code comes back.
func TestProxy(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"id":1,"op":"hello","protocol":1}`,
		`{"op":"hint","hints":["data/x"]}`,
		`{"id":2,"op":"pull"}`,
		`{"id":3,"op":"bad"}`,
		"not json",
	}, "\n") + "\n"
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AGENTTRACE_FAKE_AGENT=1")
	var out, trace strings.Builder
	err := Proxy(cmd, strings.NewReader(in), &out, &trace)
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Proxy = %v, want the agent's exit code 3", err)
	}
	want := "{\"id\":1,\"result\":true}\n{\"id\":2,\"result\":true}\n{\"id\":3,\"error\":{\"kind\":\"error\",\"message\":\"no\"}}\n"
	if out.String() != want {
		t.Fatalf("answers passed on:\n%s\nwant\n%s", out.String(), want)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(trace.String()), "\n") {
		var rec struct {
			Op string
			At float64
			MS float64
			OK bool
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.At == 0 || rec.MS < 0 {
			t.Fatalf("trace line %q: %v", line, err)
		}
		if rec.Op == "hint" && rec.MS != 0 {
			t.Errorf("hint traced with %v ms, want 0", rec.MS)
		}
		got = append(got, fmt.Sprintf("%s:%v", rec.Op, rec.OK))
	}
	slices.Sort(got) // a hint is traced when sent, the others when answered
	if fmt.Sprint(got) != "[bad:false hello:true hint:true pull:true]" {
		t.Fatalf("trace = %v", got)
	}
}

package main

import (
	"strings"
	"testing"
)

// TestExecModelReadsTypePartitions is issue 13's `exec --model` failure: a run
// of consumer reads vpc's "latest" marker, which lives in the type-wide
// partition data--command--shell, not in consumer's own; and both hosts write
// consumer's evaluated definition into definitions-evaluated--command--shell.
// The scoped sync before the run must read both, or the run misses vpc's data
// and the commit after it conflicts.
func TestExecModelReadsTypePartitions(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "execmodel")
	c.ok("init", "--blobs", fileURL(t.TempDir()))
	control, writer := t.TempDir(), t.TempDir()
	hc := []string{"--cache", control, "--host", "control"}
	hw := []string{"--cache", writer, "--host", "writer"}
	c.ok(append(hc, "sync")...)

	put(t, writer, "data/command/shell/vpc-id/result/1/raw", "vpc-0abc123")
	put(t, writer, "data/command/shell/vpc-id/result/latest", "1")
	put(t, writer, "definitions-evaluated/command/shell/vpc.yaml", "vpc")
	c.ok(append(hw, "commit", "-m", "run vpc")...)
	put(t, writer, "data/command/shell/con-id/result/1/raw", "consumer sees vpc-0abc123")
	put(t, writer, "data/command/shell/con-id/result/latest", "1")
	put(t, writer, "definitions-evaluated/command/shell/consumer.yaml", "consumer v1")
	c.ok(append(hw, "commit", "-m", "run consumer")...)

	// control runs consumer: it reads vpc's marker, then writes its own run.
	script := `set -e; cd "$SYNCLEDGER_CACHE"; cat data/command/shell/vpc-id/result/latest
mkdir -p data/command/shell/con-id/result/2; echo "consumer again" > data/command/shell/con-id/result/2/raw
echo 2 > data/command/shell/con-id/result/latest; echo "consumer v2" > definitions-evaluated/command/shell/consumer.yaml`
	r := c.run(append(hc, "exec", "--model", "command/shell:con-id", "--", "sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("exec --model: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "1") {
		t.Fatalf("the run did not see vpc's latest marker: %q", r.stdout)
	}
	c.ok(append(hc, "sync")...)
	st := c.status(control)
	if st.HWM != st.Head || len(st.Dirty) != 0 {
		t.Fatalf("control after sync: hwm %d head %d dirty %q", st.HWM, st.Head, st.Dirty)
	}
}

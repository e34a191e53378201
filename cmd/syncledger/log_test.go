package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestLogGroupsCLI: log prints one line per commit, at the seq of its last
// part printed, and a partition filter's line says which of the commit's
// parts it holds — read through the partition index, and followed.
func TestLogGroupsCLI(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	env := consumeEnv(l)
	c1 := l.Commit(t, "a", "b")
	c2 := l.Commit(t, "b")
	c3 := l.Commit(t, "a", "b", "c")
	fields := func(line string) string { // seq and partitions
		f := strings.Fields(line) // seq, time, host, commit, partitions, "N files", "commit …"
		return f[0] + " " + strings.Join(f[4:len(f)-4], " ")
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{fmt.Sprintf("%d a,b", c1[1]), fmt.Sprintf("%d b", c2[0]), fmt.Sprintf("%d a,b,c", c3[2])}},
		{[]string{"--partition", "b"}, []string{fmt.Sprintf("%d b (1 of 2)", c1[1]), fmt.Sprintf("%d b", c2[0]), fmt.Sprintf("%d b (1 of 3)", c3[1])}},
		{[]string{"--partition", "a", "--partition", "c"}, []string{fmt.Sprintf("%d a (1 of 2)", c1[0]), fmt.Sprintf("%d a,c (2 of 3)", c3[2])}},
	} {
		r := cli(t, env, append([]string{"log"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("log %v: exit %d\n%s", tc.args, r.code, r.stderr)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			got = append(got, fields(line))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("log %v:\n%s\nwant:\n%s", tc.args, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	p := startProc(t, env, "log", "--follow", "--partition", "a", "--partition", "c")
	for _, want := range []string{fmt.Sprintf("%d a (1 of 2)", c1[0]), fmt.Sprintf("%d a,c (2 of 3)", c3[2])} {
		if got := fields(p.line(t, `^\s*\d+ `)); got != want {
			t.Errorf("log --follow: %q, want %q", got, want)
		}
	}
	p.stop(t, syscall.SIGTERM)
}

package main

import (
	"strings"
	"testing"
)

// wayOutReason stands for the '…' a printed way out leaves to the admin (the
// reason of a quarantine).
const wayOutReason = "followed by the way-out test"

// wayOuts returns the commands a failed run printed after "way out:", as
// argument lists without the leading "syncledger": each as printed, with its
// trailing "   (…)" comment cut and a '…' placeholder filled in.
func wayOuts(t *testing.T, stderr string) [][]string {
	t.Helper()
	var out [][]string
	for line := range strings.Lines(stderr) {
		cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "way out: ")
		if !ok {
			continue
		}
		cmd, _, _ = strings.Cut(cmd, "   (")
		cmd = strings.ReplaceAll(cmd, "'…'", "'"+wayOutReason+"'")
		args := shellSplit(t, cmd)
		if len(args) == 0 || args[0] != "syncledger" {
			t.Fatalf("way out %q is not a syncledger command", cmd)
		}
		out = append(out, args[1:])
	}
	return out
}

// shellSplit splits a command line as a POSIX shell does for the quoting the
// CLI prints: words, single quotes, and backslash escapes.
func shellSplit(t *testing.T, s string) []string {
	t.Helper()
	var (
		args   []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unterminated quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// followWayOuts runs args with globals (--cache, --host: where the user ran
// it) and, while a command fails, follows the way outs it printed, as printed,
// in order, each with the same globals (an admin's command too: the test's
// credentials are the admin's), then runs the failed command again. It fails
// the test if a failure prints no way out or if the whole takes more than
// maxSteps commands: a circle of ways out never ends. It returns the commands
// run, in order.
func (c *shell) followWayOuts(globals []string, maxSteps int, args ...string) []string {
	c.t.Helper()
	var trail []string
	stack := [][]string{args}
	for len(stack) > 0 {
		cmd := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if len(trail) == maxSteps {
			c.t.Fatalf("no convergence within %d commands: %s", maxSteps, strings.Join(trail, " → "))
		}
		trail = append(trail, strings.Join(cmd, " "))
		r := c.run(append(append([]string{}, globals...), cmd...)...)
		if r.code == 0 {
			continue
		}
		outs := wayOuts(c.t, r.stderr)
		if len(outs) == 0 {
			c.t.Fatalf("%s: exit %d with no way out:\n%s\n(after %s)", strings.Join(cmd, " "), r.code, r.stderr, strings.Join(trail, " → "))
		}
		stack = append(stack, cmd)
		for i := len(outs) - 1; i >= 0; i-- {
			stack = append(stack, outs[i])
		}
	}
	return trail
}

// A lazy host whose indexed version gc collected (a later commit replaced it
// and retention dropped the events that wrote it) was told by fetch that the
// message at seq 0 was bad, with `quarantine 0 --force` as the way out (issue
// 26 point 10). fetch now says the host is behind and the way out is a sync,
// then the same fetch; followed as printed, the host holds the current version.
func TestFetchAfterGCWayOutCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "gone")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	w, lazy := t.TempDir(), t.TempDir()
	hw := []string{"--cache", w, "--host", "writer"}
	hl := []string{"--cache", lazy, "--host", "lazy"}
	const raw = "data/t/m/one/1/raw"
	put(t, w, raw, "v1")
	c.ok(append(hw, "commit", "-m", "v1")...)
	c.ok(append(hl, "sync", "--lazy")...)
	put(t, w, raw, "v2")
	c.ok(append(hw, "commit", "-m", "v2")...)
	c.ok("snapshot", "--retain-margin", "0")
	c.ok("gc", "--grace", "0s", "--allow-short-grace")

	r := c.run(append(hl, "fetch", raw)...)
	if r.code == 0 || strings.Contains(r.stderr, "quarantine") || !strings.Contains(r.stderr, "way out: syncledger sync --lazy") {
		t.Fatalf("fetch of a version gc collected: exit %d, want the way out of a host behind:\n%s", r.code, r.stderr)
	}
	trail := c.followWayOuts(hl, 6, "fetch", raw)
	t.Logf("converged: %s", strings.Join(trail, " → "))
	if got := tree(t, lazy)[raw]; got != "v2" {
		t.Fatalf("%s after the way out: %q, want v2", raw, got)
	}
	checkConverged(c, []string{w, lazy})
}

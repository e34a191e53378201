package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
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
// it) and, while a command fails, follows the first way out it printed, as
// printed, with the same globals (an admin's command too: the test's
// credentials are the admin's), then runs the failed command again. (The
// lines a failure prints are alternatives: commit, or resolve either way;
// the first is the one that keeps this host's work.) It fails
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
		stack = append(stack, cmd, outs[0])
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

// A commit whose content the blob store never received stops every fresh
// host, which prints `quarantine SEQ --force` as the way out. When a later
// commit had already extended the partition (its prev names the lost one),
// following that way out broke every fresh sync, rebuild, snapshot and replay
// for good: "seq 3 follows seq 2, which the stream no longer holds" (issue 26
// point 5). The notice now records the quarantined event's link, every reader
// bridges it, and the way out, followed as printed, converges.
func TestQuarantineExtendedPartitionCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "qext")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, fresh := t.TempDir(), t.TempDir()
	ha := []string{"--cache", a, "--host", "a"}
	hf := []string{"--cache", fresh, "--host", "fresh"}
	put(t, a, "notes/a", "a")
	put(t, a, "notes/b", "b")
	c.ok(append(ha, "commit")...)
	st := c.status(a)
	var info struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal([]byte(c.ok(append(ha, "status", "--json")...)), &info); err != nil || info.UUID == "" {
		t.Fatalf("status --json: %v", err)
	}
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := natsjs.OpenLog(t.Context(), nc, "qext")
	if err != nil {
		t.Fatal(err)
	}
	mk := st.Partitions["notes"]
	heads := map[string]ledger.Record{"notes": {Seq: ledger.Seq(mk.Seq), Event: ledger.Event{ModelSeq: mk.ModelSeq}}}
	appendT(t, l, info.UUID, "careless", "lost", heads, file("notes/lost", "never uploaded"))
	lost := heads["notes"].Seq
	appendT(t, l, info.UUID, "careless", "later", heads, ledger.Entry{Path: "notes/b", Deleted: true})

	r := c.run(append(hf, "sync")...)
	if want := fmt.Sprintf("way out: syncledger quarantine %d --force", lost); r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("fresh sync: exit %d, want %q:\n%s", r.code, want, r.stderr)
	}
	trail := c.followWayOuts(hf, 6, "sync")
	t.Logf("converged: %s", strings.Join(trail, " → "))
	if got := tree(t, fresh); got["notes/a"] != "a" || got["notes/b"] != "" || got["notes/lost"] != "" {
		t.Fatalf("fresh host after the way out: %v", got)
	}
	// The partition goes on: host a (synced before the quarantine) reads
	// past it, commits to it, and every reader agrees.
	c.ok(append(ha, "sync")...)
	put(t, a, "notes/c", "c")
	c.ok(append(ha, "commit")...)
	c.ok("snapshot")
	head := c.status(a).Head
	replayed := filepath.Join(t.TempDir(), "replayed")
	c.ok("replay", "--to", fmt.Sprint(head), "--into", replayed)
	if diff := cmp.Diff(tree(t, a), tree(t, replayed)); diff != "" {
		t.Fatalf("replay differs from host a (-a +replay):\n%s", diff)
	}
	checkConverged(c, []string{a, fresh})
}

// TestWayOutsConverge is the table of the error states a host meets in daily
// use, each entered as a user would and left by following the printed way
// outs, as printed, in order (followWayOuts), within a few commands: the
// command then succeeds, the local edit is published, and every host, a fresh
// one and a rebuilt one agree (checkConverged). Issue 26 point 6 was a circle:
// a host behind retention with an edit that conflicts with nothing was told
// sync → commit → rebuild → commit … and never published it. The states of
// points 5 and 10 (a quarantine of an extended partition, a fetch of a version
// gc collected) have their own tests above.
func TestWayOutsConverge(t *testing.T) {
	t.Parallel()
	type state struct {
		c      *shell
		w, h   string // a writer's cache, and the cache in the error state
		hw, hh []string
		edit   string // the path h edited (its content is h's)
	}
	// behind leaves h behind retention: the writer commits on, a snapshot
	// drops every event before it.
	behind := func(s *state) {
		for i := range 3 {
			put(t, s.w, fmt.Sprintf("notes/w%d", i), fmt.Sprint(i))
			s.c.ok(append(s.hw, "commit")...)
		}
		s.c.ok("snapshot", "--retain-margin", "0")
	}
	for _, tc := range []struct {
		name  string
		setup func(s *state)
		cmd   []string
	}{
		{"behind retention, an edit: sync", func(s *state) { put(t, s.h, s.edit, "mine"); behind(s) }, []string{"sync"}},
		{"behind retention, an edit: commit", func(s *state) { put(t, s.h, s.edit, "mine"); behind(s) }, []string{"commit"}},
		{"behind retention, an edit: rebuild", func(s *state) { put(t, s.h, s.edit, "mine"); behind(s) }, []string{"rebuild", "--quiet"}},
		{"an edit the ledger changed too: sync", func(s *state) {
			put(t, s.h, s.edit, "mine")
			put(t, s.w, s.edit, "theirs")
			s.c.ok(append(s.hw, "commit")...)
		}, []string{"sync"}},
		{"an edit the ledger changed too: commit", func(s *state) {
			put(t, s.h, s.edit, "mine")
			put(t, s.w, s.edit, "theirs")
			s.c.ok(append(s.hw, "commit")...)
		}, []string{"commit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, "ways")
			c.ok("init", "--blobs", "file://"+t.TempDir())
			s := &state{c: c, w: t.TempDir(), h: t.TempDir(), edit: "notes/shared"}
			s.hw, s.hh = []string{"--cache", s.w, "--host", "w"}, []string{"--cache", s.h, "--host", "h"}
			put(t, s.w, s.edit, "base")
			put(t, s.w, "notes/other", "o")
			c.ok(append(s.hw, "commit")...)
			c.ok(append(s.hh, "sync")...)
			tc.setup(s)
			trail := c.followWayOuts(s.hh, 8, tc.cmd...)
			// The edit is published: the way out that leads on is a commit.
			if st := c.status(s.h); len(st.Dirty) > 0 {
				trail = append(trail, c.followWayOuts(s.hh, 8, "commit")...)
			}
			t.Logf("converged: %s", strings.Join(trail, " → "))
			c.ok(append(s.hw, "sync")...)
			if got := tree(t, s.w)[s.edit]; got != "mine" {
				t.Fatalf("%s on the writer after the way out: %q, want h's edit published", s.edit, got)
			}
			checkConverged(c, []string{s.w, s.h})
		})
	}
}

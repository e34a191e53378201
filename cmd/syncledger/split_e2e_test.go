package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

// putWide writes one file in each of parts partitions (data--t--mNNNN).
func putWide(t *testing.T, cache string, parts int, gen string) {
	t.Helper()
	for m := range parts {
		put(t, cache, wideRaw(m), fmt.Sprintf("%s %d", gen, m))
	}
}

func wideRaw(m int) string { return fmt.Sprintf("data/t/m%04d/d/0/raw", m) }

// splitNotes returns stderr's lines that say a change was split into n commits.
func splitNotes(stderr string, n int) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, fmt.Sprintf("published as %d commits", n)) {
			out = append(out, l)
		}
	}
	return out
}

// TestSplitCommitCLI: commit, commit --json and exec of a change of more
// partitions than one atomic commit holds publish several commits and say so
// in one line on stderr; --json lists every commit; a fresh host syncs to the
// head with the same files; a commit afterwards publishes nothing.
func TestSplitCommitCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "split")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	ha := []string{"--cache", a, "--host", "a"}

	putWide(t, a, 2_500, "v1")
	r := c.run(append(ha, "commit", "-m", "cold")...)
	if r.code != 0 {
		t.Fatalf("commit: exit %d\n%s", r.code, r.stderr)
	}
	if notes := splitNotes(r.stderr, 3); len(notes) != 1 || !strings.Contains(notes[0], "2500 partitions") {
		t.Fatalf("commit of 2,500 partitions: stderr says %q, want one line saying 3 commits", r.stderr)
	}
	for i := 1; i <= 3; i++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^committed \S+ \(part %d of 3\) at seq \d+-\d+: `, i)).MatchString(r.stdout) {
			t.Fatalf("stdout does not report part %d of 3:\n%s", i, tail(r.stdout))
		}
	}
	if !strings.Contains(r.stdout, "3 commits: 2500 files written, 0 deleted") {
		t.Fatalf("stdout has no total:\n%s", tail(r.stdout))
	}
	log := c.ok("log")
	for i := 1; i <= 3; i++ {
		if !strings.Contains(log, fmt.Sprintf("cold (part %d of 3)", i)) {
			t.Fatalf("the log has no commit \"cold (part %d of 3)\":\n%s", i, tail(log))
		}
	}

	putWide(t, a, 1_100, "v2")
	r = c.run(append(ha, "commit", "-m", "second", "--json")...)
	var res struct {
		Commit  string `json:"commit"`
		Commits []struct {
			Commit     string       `json:"commit"`
			Seqs       []ledger.Seq `json:"seqs"`
			Partitions int          `json:"partitions"`
		} `json:"commits"`
		Written int `json:"written"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("commit --json: exit %d, %v\n%s\n%s", r.code, err, tail(r.stdout), r.stderr)
	}
	if len(res.Commits) != 2 || res.Commits[0].Partitions != 1000 || res.Commits[1].Partitions != 100 ||
		res.Commits[0].Commit == "" || res.Commit != res.Commits[1].Commit || res.Written != 1_100 {
		t.Fatalf("commit --json of 1,100 partitions: %+v", res)
	}
	if notes := splitNotes(r.stderr, 2); len(notes) != 1 {
		t.Fatalf("commit --json: stderr %q, want one line saying 2 commits", r.stderr)
	}

	putWide(t, a, 1_001, "v3")
	r = c.run(append(ha, "exec", "--", "true")...)
	if r.code != 0 || len(splitNotes(r.stderr, 2)) != 1 {
		t.Fatalf("exec of a change of 1,001 partitions: exit %d, stderr %q, want one line saying 2 commits", r.code, r.stderr)
	}

	if out := c.ok(append(ha, "commit")...); !strings.HasPrefix(out, "nothing to commit") {
		t.Fatalf("commit after the split commits: %q", out)
	}
	c.ok("--cache", b, "--host", "b", "sync")
	if diff := cmp.Diff(tree(t, a), tree(t, b)); diff != "" {
		t.Fatalf("caches differ (-a +b):\n%s", diff)
	}
	sa, sb := c.status(a), c.status(b)
	if sb.HWM != sb.Head || sa.HWM != sa.Head || len(sa.Dirty) != 0 {
		t.Fatalf("hwm a %d b %d head %d; a dirty %d", sa.HWM, sb.HWM, sb.Head, len(sa.Dirty))
	}
	if sb.Head != 2_500+1_100+1_001 {
		t.Fatalf("head %d, want one event per partition of each commit (%d)", sb.Head, 2_500+1_100+1_001)
	}
}

// tail is the end of a long output, for a failure message.
func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// TestPartialCommitErrorJSON: a commit that stops after publishing some of the
// commits of a split change keeps its failure's exit code, paths and commands,
// and its --json error names the commits published.
func TestPartialCommitErrorJSON(t *testing.T) {
	published := []host.CommitPart{{Commit: "c1", Seqs: []ledger.Seq{1, 2}, Partitions: 2, Written: 2}}
	err := fmt.Errorf("commit: %w", &host.PartialCommitError{Published: published, Err: &host.ConflictError{Paths: []string{"audit/x"}}})
	o := newErrorObject(err)
	if o.Code != exitConflict || o.Kind != "conflict" || !cmp.Equal(o.Paths, []string{"audit/x"}) || len(o.Commands) == 0 {
		t.Fatalf("error object %+v: want the conflict's code, kind, paths and commands", o)
	}
	if !cmp.Equal(o.Detail["published"], published) || !strings.Contains(o.Message, "c1") {
		t.Fatalf("error object %+v: want the published commit in detail and message", o)
	}
}

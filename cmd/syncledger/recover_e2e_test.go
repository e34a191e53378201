package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// checkConverged is #14's acceptance check after a way out was taken: every
// cache, a fresh host and a rebuild (of another fresh host) hold identical
// files, with hwm == head and nothing uncommitted. except lists paths that stay
// local to the cache holding them (files the ledger cannot carry).
func checkConverged(c *shell, caches []string, except ...string) {
	c.t.Helper()
	t := c.t
	for _, cache := range caches {
		c.ok("--cache", cache, "sync")
	}
	fresh, rebuilt := t.TempDir(), t.TempDir()
	c.ok("--cache", fresh, "--host", "fresh", "sync")
	c.ok("--cache", rebuilt, "--host", "rebuilt", "sync")
	c.ok("--cache", rebuilt, "--host", "rebuilt", "rebuild", "--quiet")
	want := tree(t, fresh)
	for _, cache := range append(caches, rebuilt) {
		got := tree(t, cache)
		maps.DeleteFunc(got, func(p, _ string) bool {
			for _, e := range except {
				if p == e {
					return true
				}
			}
			return false
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("cache %s differs from a fresh host (-fresh +cache):\n%s", cache, diff)
		}
	}
	for _, cache := range append(caches, fresh, rebuilt) {
		if st := c.status(cache); st.HWM != st.Head || len(st.Dirty) != 0 {
			t.Fatalf("cache %s: hwm %d, head %d, dirty %v", cache, st.HWM, st.Head, st.Dirty)
		}
		c.ok("--cache", cache, "verify")
	}
}

// A partition key too long for a subject token (#14 point 5: three 80-character
// Japanese directory names under data/ give a ≈2,174-byte token) no longer blocks
// every commit: its file is left out with a warning naming it, the other files
// are committed, and every host converges.
func TestLongPartitionKeyCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "longkey")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	dir := strings.Repeat("デ", 80)
	long := "data/" + dir + "/" + dir + "/" + dir + "/metadata.yaml"
	put(t, a, long, "too deep to carry")
	put(t, a, "audit/one", "1")
	put(t, a, "data/t/m/x/metadata.yaml", "x")
	r := c.run("--cache", a, "--host", "a", "commit")
	if r.code != 0 {
		t.Fatalf("commit beside a file whose partition cannot be carried: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "not synced") || !strings.Contains(r.stderr, dir) || !strings.Contains(r.stderr, "too large") {
		t.Fatalf("commit did not warn naming the file left out:\n%s", r.stderr)
	}
	c.ok("--cache", b, "--host", "b", "sync")
	if got := tree(t, b); got["audit/one"] != "1" || got["data/t/m/x/metadata.yaml"] != "x" || len(got) != 2 {
		t.Fatalf("host b holds %v", got)
	}
	// Later commits of other files go on as before.
	put(t, a, "audit/two", "2")
	c.ok("--cache", a, "--host", "a", "commit")
	checkConverged(c, []string{a, b}, long)
}

// natsURL is the server URL a shell's environment points at.
func (c *shell) natsURL() string {
	for _, kv := range c.env {
		if u, ok := strings.CutPrefix(kv, "SYNCLEDGER_NATS="); ok {
			return u
		}
	}
	c.t.Fatal("no SYNCLEDGER_NATS in the environment")
	return ""
}

// publishRaw puts body on a partition's subject as a broken or hostile client
// could, bypassing the codec, and returns its seq.
func (c *shell) publishRaw(ledgerName, partition, body string) ledger.Seq {
	c.t.Helper()
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		c.t.Fatal(err)
	}
	ack, err := js.Publish(ledger.Subject(ledgerName, partition), []byte(body))
	if err != nil {
		c.t.Fatal(err)
	}
	return ledger.Seq(ack.Sequence)
}

// A message that is not a valid event no longer stops the ledger for good
// (#14 point 4). A raw `{"v":1` and a valid-JSON event on the subject of
// another partition stop every sync and commit at their seqs, with an error
// naming `syncledger quarantine <seq>`; once quarantined, every host — a fresh
// one, a snapshot and a rebuild included — skips exactly those seqs, commits
// to their partitions go on (the next event names the quarantined seq as its
// prev, modelSeq 1 included), and log and quarantine --list show them.
func TestQuarantineCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "quar")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	var info struct {
		UUID string `json:"uuid"`
	}
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "audit/x", "1")
	c.ok("--cache", a, "--host", "a", "commit")
	c.ok("--cache", b, "--host", "b", "sync")
	if err := json.Unmarshal([]byte(c.ok("--cache", b, "status", "--json")), &info); err != nil || info.UUID == "" {
		t.Fatalf("status --json: %v", err)
	}

	truncated := c.publishRaw("quar", "audit", `{"v":1`)
	elsewhere := c.publishRaw("quar", "notes", `{"v":1,"ledger":"`+info.UUID+`","commit":"019a1b2c-3d4e-7f60-8a1b-2c3d4e5f6a7b","host":"evil",`+
		`"at":"2026-11-29T10:00:00Z","partition":"audit","modelSeq":2,"prev":1,"parts":1,"part":1,`+
		`"entries":[{"path":"audit/evil","sha256":"`+ledger.DigestOf([]byte("evil")).String()+`","size":4,"mode":420}]}`)

	stuck := func(seq ledger.Seq, args ...string) {
		t.Helper()
		r := c.run(args...)
		want := fmt.Sprintf("syncledger quarantine %d ", seq)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Fatalf("%v: exit %d, want 1 and an error naming %q:\n%s", args, r.code, want, r.stderr)
		}
		args = append(args, "--json")
		if e := checkErrorJSON(t, args, c.run(args...)); e.Kind != "bad-message" || len(e.Commands) != 1 || !strings.HasPrefix(e.Commands[0], want) {
			t.Fatalf("%v: error object %+v", args, e)
		}
	}
	stuck(truncated, "--cache", b, "--host", "b", "sync")
	put(t, a, "audit/y", "2")
	stuck(truncated, "--cache", a, "--host", "a", "commit")
	if r := c.run("quarantine", fmt.Sprint(truncated)); r.code != 2 {
		t.Fatalf("quarantine without --reason: exit %d", r.code)
	}
	c.ok("quarantine", fmt.Sprint(truncated), "--reason", "truncated by a broken tool")
	if r := c.run("quarantine", fmt.Sprint(truncated), "--reason", "again"); r.code != 3 || !strings.Contains(r.stderr, "already quarantined") {
		t.Fatalf("second quarantine of seq %d: exit %d\n%s", truncated, r.code, r.stderr)
	}
	stuck(elsewhere, "--cache", b, "--host", "b", "sync")
	c.ok("quarantine", fmt.Sprint(elsewhere), "--reason", "event of audit on the subject of notes")

	// A valid event whose content the blob store never received.
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := natsjs.OpenLog(t.Context(), nc, "quar")
	if err != nil {
		t.Fatal(err)
	}
	appendT(t, l, info.UUID, "careless", "", map[string]ledger.Record{}, file("lost/x", "never uploaded"))
	lost := ledger.Seq(c.status(a).Head)
	stuck(lost, "--cache", b, "--host", "b", "sync")
	if r := c.run("quarantine", fmt.Sprint(lost), "--reason", "content never uploaded"); r.code != 1 || !strings.Contains(r.stderr, "well-formed event") {
		t.Fatalf("quarantine of a well-formed event without --force: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("--cache", b, "sync"); !strings.Contains(r.stderr, fmt.Sprintf("syncledger quarantine %d --force ", lost)) {
		t.Fatalf("the error of a host stuck at a well-formed event does not name --force:\n%s", r.stderr)
	}
	c.ok("quarantine", fmt.Sprint(lost), "--force", "--reason", "content never uploaded")

	// A well-formed event whose parts count lies (part 1 of 2, alone): it shows
	// at the next commit, and the error names the liar, not that commit.
	liar := c.publishRaw("quar", "parts", `{"v":1,"ledger":"`+info.UUID+`","commit":"019a1b2c-3d4e-7f60-8a1b-2c3d4e5f6a7c","host":"liar",`+
		`"at":"2026-11-29T10:00:00Z","partition":"parts","modelSeq":1,"prev":0,"parts":2,"part":1,`+
		`"entries":[{"path":"parts/p","sha256":"`+ledger.DigestOf([]byte("1")).String()+`","size":1,"mode":420}]}`)
	put(t, b, "notes/early", "e")
	if r := c.run("--cache", b, "--host", "b", "commit"); r.code != 0 && !strings.Contains(r.stderr, fmt.Sprintf("syncledger quarantine %d --force ", liar)) {
		t.Fatalf("commit after the liar: exit %d\n%s", r.code, r.stderr)
	}
	stuck(liar, "--cache", a, "--host", "a", "sync")
	c.ok("quarantine", fmt.Sprint(liar), "--force", "--reason", "part 1 of 2 alone")
	// Host a applied the liar's part before its lie showed: it must rebuild.
	if r := c.run("--cache", a, "--host", "a", "sync"); r.code != 1 || !strings.Contains(r.stderr, "way out: syncledger rebuild") {
		t.Fatalf("sync of a host that applied the quarantined seq: exit %d\n%s", r.code, r.stderr)
	}
	c.ok("--cache", a, "--host", "a", "rebuild", "--quiet")
	put(t, a, "parts/q", "q")
	put(t, a, "lost/x", "uploaded this time")

	// Both partitions go on: audit's next event follows the quarantined seq,
	// notes' first event (modelSeq 1) names it as its prev.
	c.ok("--cache", a, "--host", "a", "commit")
	c.ok("--cache", b, "--host", "b", "sync")
	put(t, b, "notes/n", "n")
	c.ok("--cache", b, "--host", "b", "commit")
	c.ok("--cache", a, "--host", "a", "sync")
	if got := tree(t, a); got["notes/n"] != "n" || got["audit/y"] != "2" || got["audit/evil"] != "" || got["lost/x"] != "uploaded this time" || got["parts/q"] != "q" || got["parts/p"] != "" {
		t.Fatalf("host a holds %v", got)
	}

	out := c.ok("log")
	for _, want := range []string{fmt.Sprintf("%d  quarantined (partition audit)", truncated), fmt.Sprintf("quarantine of seq %d: truncated by a broken tool", truncated),
		fmt.Sprintf("%d  quarantined (partition notes)", elsewhere)} {
		if !strings.Contains(out, want) {
			t.Fatalf("log does not show %q:\n%s", want, out)
		}
	}
	var rows []quarantineRow
	if err := json.Unmarshal([]byte(c.ok("quarantine", "--list", "--json")), &rows); err != nil || len(rows) != 4 || rows[0].Seq != truncated || rows[1].Seq != elsewhere || rows[2].Seq != lost || rows[3].Seq != liar {
		t.Fatalf("quarantine --list --json: %v %+v", err, rows)
	}
	if st := c.status(a); st.HWM != st.Head {
		t.Fatalf("host a: hwm %d, head %d", st.HWM, st.Head)
	}
	var st struct{ Quarantined []ledger.Seq }
	if err := json.Unmarshal([]byte(c.ok("--cache", a, "status", "--json")), &st); err != nil || !slices.Equal(st.Quarantined, []ledger.Seq{truncated, elsewhere, lost, liar}) {
		t.Fatalf("status --json quarantined: %v %v", st.Quarantined, err)
	}

	// A replay and a consumer skip the same seqs.
	head := ledger.Seq(c.status(a).Head)
	replayed := filepath.Join(t.TempDir(), "replayed")
	c.ok("replay", "--to", fmt.Sprint(head), "--into", replayed)
	if diff := cmp.Diff(tree(t, a), tree(t, replayed)); diff != "" {
		t.Fatalf("replay differs from host a (-a +replay):\n%s", diff)
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startProc(t, c.env, "consume", "audit", "--file", audit)
	consumertest.Wait(t, 30*time.Second, "every commit audited", func() bool {
		s := auditSeqs(t, audit)
		return len(s) > 0 && s[len(s)-1] == head
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("consume audit exit %d:\n%s", code, p.stderr)
	}
	for _, s := range auditSeqs(t, audit) {
		if s == truncated || s == elsewhere || s == lost || s == liar {
			t.Fatalf("the consumer handled quarantined seq %d", s)
		}
	}
	if out := c.ok("consume", "dead-letters", "--json"); strings.TrimSpace(out) != "" {
		t.Fatalf("dead letters: %s", out)
	}

	c.ok("snapshot")
	checkConverged(c, []string{a, b})
}

// A cached file altered with its size, mtime and mode kept (#14 point 7) was
// reported by verify and repaired by nothing. verify --repair restores it from
// the blob store and says so; a real local edit (its mtime moved) is left for
// the user to commit.
func TestVerifyRepairCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "repair")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "audit/rotten", "the ledger's content")
	put(t, a, "audit/edited", "before")
	c.ok("--cache", a, "--host", "a", "commit")
	c.ok("--cache", b, "--host", "b", "sync")

	rotten := filepath.Join(b, "audit", "rotten")
	fi, err := os.Stat(rotten)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rotten, []byte("THE LEDGER'S CONTENT"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(rotten, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(b, "audit", "edited")
	put(t, b, "audit/edited", "after!")
	later := fi.ModTime().Add(time.Minute)
	if err := os.Chtimes(edited, later, later); err != nil {
		t.Fatal(err)
	}

	r := c.run("--cache", b, "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "altered  audit/rotten") || !strings.Contains(r.stdout, "verify --repair") {
		t.Fatalf("verify: exit %d\n%s", r.code, r.stdout)
	}
	// The repair restores the corruption and leaves the edit (exit 1: still altered).
	r = c.run("--cache", b, "verify", "--repair", "--json")
	var res struct {
		Altered, Restored []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 1 ||
		!slices.Equal(res.Restored, []string{"audit/rotten"}) || !slices.Equal(res.Altered, []string{"audit/edited"}) {
		t.Fatalf("verify --repair --json: exit %d, %+v, %v\n%s", r.code, res, err, r.stdout)
	}
	if got, _ := os.ReadFile(rotten); string(got) != "the ledger's content" {
		t.Fatalf("audit/rotten holds %q after the repair", got)
	}
	if got, _ := os.ReadFile(edited); string(got) != "after!" {
		t.Fatalf("the local edit was overwritten: %q", got)
	}
	c.ok("--cache", b, "--host", "b", "commit")
	if out := c.ok("--cache", b, "verify", "--repair"); !strings.Contains(out, "0 altered, 0 restored") {
		t.Fatalf("verify --repair after the commit:\n%s", out)
	}
	checkConverged(c, []string{a, b})
}

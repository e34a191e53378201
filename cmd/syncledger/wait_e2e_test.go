package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/swamp/agent"
)

// noAnswerWait is the --wait of the tests of servers that never answer.
const noAnswerWait = 4 * time.Second

// TestNoAnswerCLI (issue 39 point 4): `syncledger commit` against a blob store
// that accepts connections and never answers (an S3 endpoint that hangs),
// and against a NATS server that never answers (a network cut that drops
// packets, the connection open), says on stderr what it waits for within a
// few seconds and gives up within --wait — exit 1, kind no-answer, what to do
// — and loses nothing: the files stay dirty, and the next commit, once the
// server answers, publishes them. Before, the commit waited silently, 400 s
// and more.
func TestNoAnswerCLI(t *testing.T) {
	t.Parallel()
	c, proxy, hang, s3 := noAnswerLedger(t, "wait")
	cache, other := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	put(t, cache, "audit/x", "1")
	c.ok("--cache", cache, "commit", "-m", "first")

	for _, tc := range []struct {
		name   string
		cut    func(on bool)
		server string // what stderr names
		late   bool   // what it held may arrive once it answers
	}{
		{"blob store hangs", hang.Set, "the blob store (s3://ledger/blobs?endpoint=" + s3, false},
		{"NATS never answers", func(on bool) {
			if on { // from the commit's publish on: connected, then cut
				proxy.StallAt([]byte("syncledger.wait.p."))
			} else {
				proxy.SetStalled(false)
			}
		}, "the ledger's server (" + proxy.URL(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put(t, cache, "audit/x", tc.name)
			put(t, cache, "audit/"+strings.ReplaceAll(tc.name, " ", "-"), "new")
			head := c.status(cache).Head
			tc.cut(true)
			start := time.Now()
			r := c.run("--cache", cache, "--wait", noAnswerWait.String(), "commit", "--json", "-m", tc.name)
			took := time.Since(start)
			tc.cut(false)
			t.Logf("commit with %s: exit %d after %v\nstdout: %s\nstderr: %s", tc.name, r.code, took, r.stdout, r.stderr)
			if limit := noAnswerWait + 5*time.Second; r.code != 1 || took > limit {
				t.Fatalf("commit with %s: exit %d after %v, want 1 within %v", tc.name, r.code, took, limit)
			}
			if !strings.Contains(r.stderr, "syncledger: commit: waiting for "+tc.server) || !strings.Contains(r.stderr, "giving up after "+noAnswerWait.String()) {
				t.Fatalf("commit with %s: stderr does not say what it waits for (%s):\n%s", tc.name, tc.server, r.stderr)
			}
			var e struct {
				Error struct {
					Kind    string `json:"kind"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || e.Error.Kind != "no-answer" ||
				!strings.Contains(e.Error.Message, "gave up after waiting") || !strings.Contains(e.Error.Message, "uncommitted in the cache") {
				t.Fatalf("commit with %s: %v; want kind no-answer saying it gave up and what stays: %s", tc.name, err, r.stdout)
			}
			if tc.late && !strings.Contains(e.Error.Message, "may have been stored") {
				t.Fatalf("commit with %s: %s; want it to say its commit may have been stored (the append's answer was lost)", tc.name, e.Error.Message)
			}
			// The publish the NATS case held is sent when the network comes
			// back, as TCP sends it again: the commit that gave up may be
			// stored (its outcome unknown) — the next commit must not
			// publish it twice.
			st := c.status(cache)
			if st.Head != head && !(tc.late && st.Head == head+1) || len(st.Dirty) != 2 {
				t.Fatalf("after the commit that gave up: head %d (want %d), dirty %q (want both files)", st.Head, head, st.Dirty)
			}
			c.ok("--cache", cache, "commit", "-m", "once it answers")
			if st := c.status(cache); len(st.Dirty) != 0 || st.Head != head+1 {
				t.Fatalf("after the next commit: head %d (want %d: one commit), dirty %q", st.Head, head+1, st.Dirty)
			}
			c.ok("--cache", other, "sync")
			if got := tree(t, other)["audit/x"]; got != tc.name {
				t.Fatalf("the other host's audit/x: %q, want %q", got, tc.name)
			}
		})
	}
}

// noAnswerLedger is a ledger (name) whose NATS server is behind proxy and
// whose blob store (S3, at s3) is behind hang, created; c runs the CLI on it.
func noAnswerLedger(t *testing.T, name string) (c *shell, proxy *faulty.Proxy, hang *faulty.Hang, s3 string) {
	t.Helper()
	srv, _ := natsjstest.RunServer(t)
	proxy, err := faulty.NewProxy(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	hang, s3, blobs := hangingS3(t)
	c = &shell{t: t, env: cliEnv(append([]string{"SYNCLEDGER_NATS=" + proxy.URL(), "SYNCLEDGER_LEDGER=" + name, "SYNCLEDGER_LOG_LEVEL=warn"}, s3Env...)...)}
	c.ok("init", "--blobs", blobs)
	return c, proxy, hang, s3
}

// hangingS3 is an S3 server at url, behind hang, with a bucket "ledger";
// blobs is the --blobs URL of a store in it (its client's environment:
// s3Env).
func hangingS3(t *testing.T) (hang *faulty.Hang, url, blobs string) {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("ledger"); err != nil {
		t.Fatal(err)
	}
	hang = faulty.NewHang(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
	hs := httptest.NewServer(hang)
	t.Cleanup(hs.Close)
	t.Cleanup(hang.Close)
	return hang, hs.URL, "s3://ledger/blobs?endpoint=" + hs.URL + "&region=us-east-1&path-style=true"
}

// TestNoAnswerSwampAgent (issue 39 point 4, through swamp): the swamp agent,
// the extension's process, pushing to a blob store that accepts connections
// and never answers says on its stderr — which the extension prints on
// swamp's — what it waits for within a few seconds, and answers the push
// within --wait with an "unreachable" failure saying what stays and what to
// do; the run's files stay in the cache, and the next push, once the store
// answers, publishes them.
func TestNoAnswerSwampAgent(t *testing.T) {
	t.Parallel()
	c, _, hang, s3 := noAnswerLedger(t, "waitagent")
	cache, other := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	put(t, cache, "data/m/1", "one")
	c.ok("--cache", cache, "commit", "-m", "first")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "--cache", cache, "--wait", noAnswerWait.String(), "swamp", "agent")
	cmd.Env = c.env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			stderr <- sc.Text()
		}
		close(stderr)
	}()
	answers := bufio.NewScanner(out)
	enc := json.NewEncoder(in)
	id := int64(0)
	call := func(req map[string]any) agent.Response {
		t.Helper()
		id++
		req["id"] = id
		if err := enc.Encode(req); err != nil {
			t.Fatal(err)
		}
		if !answers.Scan() {
			t.Fatalf("%v: the agent ended without answering (%v)", req["op"], answers.Err())
		}
		var r agent.Response
		if err := json.Unmarshal(answers.Bytes(), &r); err != nil || r.ID != id {
			t.Fatalf("%v: answer %s: %v", req["op"], answers.Text(), err)
		}
		return r
	}
	if r := call(map[string]any{"op": "hello", "protocol": agent.Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}

	put(t, cache, "data/m/2", "two") // the run swamp pushes
	hang.Set(true)
	start := time.Now()
	r := call(map[string]any{"op": "push"})
	took := time.Since(start)
	hang.Set(false)
	t.Logf("push to a blob store that never answers: after %v: %+v", took, r.Error)
	if limit := noAnswerWait + 5*time.Second; r.Error == nil || took > limit {
		t.Fatalf("push: answered after %v with %+v, want a failure within %v", took, r.Error, limit)
	}
	if f := r.Error; f.Kind != "unreachable" || !strings.Contains(f.Message, "gave up after waiting") ||
		!strings.Contains(f.Message, "uncommitted in the cache, for the next swamp command") || !strings.Contains(f.Message, "see that the blob store is up") {
		t.Fatalf("push: %+v; want kind unreachable saying it gave up, what stays and what to do", f)
	}
	// The note was written before the answer (at Policy.Report, 3 s); the
	// wait for it is bounded by the agent's stderr closing at its end too.
	want := "syncledger: commit: waiting for the blob store (s3://ledger/blobs?endpoint=" + s3
	var got []string
	for line := range stderr {
		got = append(got, line)
		if strings.HasPrefix(line, want) && strings.HasSuffix(line, "giving up after "+noAnswerWait.String()) {
			break
		}
		if len(got) > 50 {
			break
		}
	}
	if n := len(got); n == 0 || !strings.HasPrefix(got[n-1], want) {
		t.Fatalf("the agent's stderr does not say what it waits for (%s…):\n%s", want, strings.Join(got, "\n"))
	}

	if r := call(map[string]any{"op": "push"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 {
		t.Fatalf("the push once the blob store answers: %+v %+v, want the run's file published", r.Result, r.Error)
	}
	in.Close() // swamp exited: the agent ends
	go func() {
		for range stderr {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent: %v", err)
	}
	if st := c.status(cache); len(st.Dirty) != 0 {
		t.Fatalf("after the agent: dirty %q", st.Dirty)
	}
	c.ok("--cache", other, "sync")
	if got := tree(t, other)["data/m/2"]; got != "two" {
		t.Fatalf("the other host's data/m/2: %q, want the run's", got)
	}
}

package main

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
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
	srv, _ := natsjstest.RunServer(t)
	proxy, err := faulty.NewProxy(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	mem := s3mem.New()
	if err := mem.CreateBucket("ledger"); err != nil {
		t.Fatal(err)
	}
	hang := faulty.NewHang(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
	s3 := httptest.NewServer(hang)
	t.Cleanup(s3.Close)
	t.Cleanup(hang.Close)
	c := &shell{t: t, env: cliEnv(
		"SYNCLEDGER_NATS="+proxy.URL(), "SYNCLEDGER_LEDGER=wait", "SYNCLEDGER_LOG_LEVEL=warn",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
	)}
	c.ok("init", "--blobs", "s3://ledger/blobs?endpoint="+s3.URL+"&region=us-east-1&path-style=true")
	cache, other := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	put(t, cache, "audit/x", "1")
	c.ok("--cache", cache, "commit", "-m", "first")

	for _, tc := range []struct {
		name   string
		cut    func(on bool)
		server string // what stderr names
		late   bool   // what it held may arrive once it answers
	}{
		{"blob store hangs", hang.Set, "the blob store (s3://ledger/blobs?endpoint=" + s3.URL, false},
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

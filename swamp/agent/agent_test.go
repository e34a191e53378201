package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

// agentClient talks to an Agent serving in this process, as the extension does.
type agentClient struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *bufio.Scanner
	id     int64
	done   chan error         // Serve's return
	cancel context.CancelFunc // Serve's context
	agent  *Agent
}

func startAgent(t *testing.T, e *env, cache string, watch Watch) *agentClient {
	t.Helper()
	return serveAgent(t, Config{Watch: watch, Ports: ports{e: e, cache: cache}})
}

// serveAgent serves an agent of cfg (with the version, cache, ways out and
// clock of every test) until the test ends.
func serveAgent(t *testing.T, cfg Config) *agentClient {
	t.Helper()
	p := cfg.Ports.(ports)
	cfg.Version, cfg.Cache, cfg.WaysOut, cfg.Clock = "v-test", p.cache, waysOut{}, p.e.clock
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &agentClient{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1), cancel: cancel, agent: a}
	go func() { c.done <- a.Serve(ctx, inR, outW); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		if err := <-c.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		c.done <- nil
		cancel()
	})
	return c
}

// call sends one request and returns the answer to it.
func (c *agentClient) call(req map[string]any) Response {
	c.t.Helper()
	c.id++
	req["id"] = c.id
	b, _ := json.Marshal(req)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
	if !c.out.Scan() {
		c.t.Fatalf("agent closed its output: %v", c.out.Err())
	}
	var resp Response
	if err := json.Unmarshal(c.out.Bytes(), &resp); err != nil || resp.ID != c.id {
		c.t.Fatalf("answer %s to request %d: %v", c.out.Bytes(), c.id, err)
	}
	return resp
}

// notify sends a request that gets no answer (a hint).
func (c *agentClient) notify(req map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(req)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

// waysOut are the tests' ways out: the resolve commands, named.
type waysOut struct{}

func (waysOut) Resolve(paths []string) (mine, theirs string) {
	return "resolve --mine " + strings.Join(paths, " "), "resolve --theirs " + strings.Join(paths, " ")
}

func (waysOut) Setup(repo, ns string) string {
	return strings.TrimSpace("syncledger swamp setup --repo " + repo + " " + ns)
}

func (waysOut) Init() string { return "syncledger init" }

func (waysOut) ServerFull(st ledger.ServerState) string {
	return fmt.Sprintf("free %d bytes on the server's %s, then run this again", st.Need(), st.Dir)
}

// countingWatch is a watch that answers "scan the whole cache" (no dirty
// set to trust), recording the hints it was given and the acks.
type countingWatch struct {
	hints [][]string
	acks  int
}

func (w *countingWatch) ForCommit(_ context.Context, _ string, hints []string) (*dirty.Snapshot, []string, error) {
	w.hints = append(w.hints, hints)
	return &dirty.Snapshot{}, nil, nil
}

func (w *countingWatch) AckCommit(context.Context, string, *dirty.Snapshot, []string) error {
	w.acks++
	return nil
}

// TestAgentHint: the next hint starts the upload of the content below a
// hint's path, without an answer and without publishing; the push then
// commits it.
func TestAgentHint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cache := t.TempDir()
	c := startAgent(t, e, cache, nil)
	if r := c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	raw := filepath.Join(cache, "data", "t", "m", "result", "1", "raw")
	if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(raw, []byte("vpc-0abc123"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hint comes before swamp's write: its work starts with the next one.
	c.notify(map[string]any{"op": "hint", "hints": []string{"no/such/path"}})
	c.notify(map[string]any{"op": "hint", "hints": []string{"data/t/m/result"}})
	c.notify(map[string]any{"op": "hint", "hints": []string{"data/t/m/log"}})
	d := ledger.DigestOf([]byte("vpc-0abc123"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := e.blobs.Stat(t.Context(), d); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hinted file's content never reached the blob store")
		}
	}
	if head, _ := e.log.LastSeq(t.Context()); head != 0 {
		t.Fatalf("a hint published: head %d", head)
	}
	// The answers so far are hello's only: the next one is the push's.
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 {
		t.Fatalf("push after the hint: %+v", r)
	}
}

// TestAgentDirtySet: after a pull the agent scans the cache in the
// background and watches it; a push then finds the files changed before the
// pull and those changed after it, hinted or not.
func TestAgentDirtySet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cache := t.TempDir()
	c := startAgent(t, e, cache, nil)
	if r := c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	write := func(rel, content string) {
		p := filepath.Join(cache, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		write("data/t/before/latest", fmt.Sprint(round)) // changed before the pull
		if r := c.call(map[string]any{"op": "pull"}); r.Error != nil {
			t.Fatalf("pull: %+v", r.Error)
		}
		write("data/t/after/latest", fmt.Sprint(round))      // after it, no hint
		write(fmt.Sprintf("data/t/new%d/1/raw", round), "x") // a new directory
		write("data/t/hinted/latest", fmt.Sprint(round))     // after it, hinted
		r := c.call(map[string]any{"op": "prepare", "hints": []string{"data/t/hinted"}})
		if r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 4 {
			t.Fatalf("round %d: prepare: %+v, want the 4 changed files", round, r)
		}
		if r := c.call(map[string]any{"op": "commit"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 4 {
			t.Fatalf("round %d: commit: %+v", round, r)
		}
	}
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 0 {
		t.Fatalf("push with nothing changed: %+v", r)
	}
}

func TestAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cache := t.TempDir()
	w := &countingWatch{}
	c := startAgent(t, e, cache, w)

	// Any release's extension of this protocol is accepted (the extension
	// records no build); another protocol says which command fixes it.
	for _, tc := range []struct {
		protocol int
		want     string
	}{
		{Protocol + 1, "install a newer syncledger"},
		{Protocol - 1, "run 'syncledger swamp setup --repo /r' with this binary"},
	} {
		r := c.call(map[string]any{"op": "hello", "protocol": tc.protocol, "repo": "/r"})
		if r.Error == nil || r.Error.Kind != "version" || !strings.Contains(r.Error.Message, tc.want) {
			t.Fatalf("hello in protocol %d: %+v; want a version error saying %q", tc.protocol, r, tc.want)
		}
	}
	if r := c.call(map[string]any{"op": "hello", "version": "syncledger v0.0.1-old", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello from an older release's extension: %+v", r.Error)
	}

	// A push of nothing publishes nothing; a push of a file publishes one commit.
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 0 {
		t.Fatalf("empty push: %+v", r)
	}
	p := filepath.Join(cache, "data", "command", "shell", "vpc", "result", "latest")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.call(map[string]any{"op": "prepare"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 {
		t.Fatalf("prepare: %+v", r)
	}
	if head, _ := e.log.LastSeq(t.Context()); head != 0 {
		t.Fatalf("prepare published: head %d", head)
	}
	r := c.call(map[string]any{"op": "commit", "hints": []string{"data/command/shell/vpc/result"}})
	if r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 || r.Result.(map[string]any)["hints"].(float64) != 1 {
		t.Fatalf("commit: %+v", r)
	}
	// The commit after a prepare checks the prepare's paths only: it asks no
	// dirty set, and acks none for that narrower check.
	if len(w.hints) != 2 || w.acks != 1 {
		t.Fatalf("hints passed on %q, %d acks; want the push's and the prepare's, an ack for the push only", w.hints, w.acks)
	}
	// A file written between a prepare and its commit (not swamp's way) waits
	// for the next push.
	if r := c.call(map[string]any{"op": "prepare"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 0 {
		t.Fatalf("prepare with nothing changed: %+v", r)
	}
	if err := os.WriteFile(p, []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.call(map[string]any{"op": "commit"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 0 {
		t.Fatalf("commit of a prepare that found nothing: %+v", r)
	}
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 1 {
		t.Fatalf("the next push: %+v", r)
	}
	if r := c.call(map[string]any{"op": "pull"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != 0 {
		t.Fatalf("pull with nothing new: %+v", r)
	}
	if r := c.call(map[string]any{"op": "verify"}); r.Error != nil || r.Result.(map[string]any)["head"].(float64) != 2 || r.Result.(map[string]any)["hwm"].(float64) != 2 {
		t.Fatalf("verify: %+v", r)
	}

	// Locks and the control plane go to the bucket.
	holder := map[string]any{"holder": "me", "hostname": "h", "pid": 1, "nonce": "n1"}
	if r := c.call(map[string]any{"op": "lock.acquire", "key": ".datastore.lock", "holder": holder, "maxWaitMs": 1000}); r.Error != nil {
		t.Fatalf("acquire: %+v", r.Error)
	}
	if r := c.call(map[string]any{"op": "lock.inspect", "key": ".datastore.lock"}); r.Error != nil || r.Result.(map[string]any)["nonce"] != "n1" {
		t.Fatalf("inspect: %+v", r)
	}
	if r := c.call(map[string]any{"op": "lock.forceRelease", "key": ".datastore.lock", "nonce": "wrong"}); r.Result != false {
		t.Fatalf("forceRelease with a wrong nonce: %+v", r)
	}
	if r := c.call(map[string]any{"op": "lock.release", "key": ".datastore.lock"}); r.Error != nil {
		t.Fatalf("release: %+v", r.Error)
	}
	if r := c.call(map[string]any{"op": "lock.inspect", "key": ".datastore.lock"}); r.Result != nil {
		t.Fatalf("inspect after release: %+v", r)
	}
	if r := c.call(map[string]any{"op": "cp.put", "key": "k", "data": []byte("v")}); r.Error != nil {
		t.Fatal(r.Error)
	}
	if r := c.call(map[string]any{"op": "cp.get", "key": "k"}); r.Result != "dg==" { // base64 of "v"
		t.Fatalf("cp.get: %+v", r)
	}
	if r := c.call(map[string]any{"op": "nosuch"}); r.Error == nil {
		t.Fatal("an unknown request was answered")
	}
}

// TestAgentPushSplit: swamp's preparePush and commitPush of a change of more
// partitions than one atomic commit holds (ledger.MaxBatch) publish it as
// consecutive commits, which the answer lists; the HWM reaches the head.
func TestAgentPushSplit(t *testing.T) {
	t.Parallel()
	const parts = ledger.MaxBatch + 100
	e := newEnv(t)
	cache := t.TempDir()
	c := startAgent(t, e, cache, nil)
	if r := c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	for m := range parts {
		p := filepath.Join(cache, "data", "command", "shell", fmt.Sprintf("m%04d", m), "result", "1", "raw")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprint(m)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.call(map[string]any{"op": "prepare"}); r.Error != nil || r.Result.(map[string]any)["files"].(float64) != parts {
		t.Fatalf("prepare: %+v", r)
	}
	r := c.call(map[string]any{"op": "commit"})
	if r.Error != nil {
		t.Fatalf("commit: %+v", r.Error)
	}
	res := r.Result.(map[string]any)
	commits, _ := res["commits"].([]any)
	if res["files"].(float64) != parts || len(commits) != 2 || commits[1] != res["commit"] {
		t.Fatalf("commit of %d partitions: %+v, want 2 commits", parts, res)
	}
	if r := c.call(map[string]any{"op": "verify"}); r.Error != nil || r.Result.(map[string]any)["head"].(float64) != parts || r.Result.(map[string]any)["hwm"].(float64) != parts {
		t.Fatalf("verify: %+v", r)
	}
}

// TestAgentGone: when swamp is gone — its end of the pipe closed, or the
// agent's context ended (its parent died) — the agent releases the locks it
// holds at once, rather than leaving them to their TTL.
func TestAgentGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, how := range []string{"input closed", "context ended"} {
		t.Run(how, func(t *testing.T) {
			p := ports{e: e, cache: t.TempDir()}
			c := serveAgent(t, Config{Ports: p})
			if r := c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol}); r.Error != nil {
				t.Fatalf("hello: %+v", r.Error)
			}
			key := "data/t/" + strings.ReplaceAll(how, " ", "-") + "/.lock"
			holder := map[string]any{"holder": "me", "hostname": "h", "pid": 1, "nonce": "n1"}
			if r := c.call(map[string]any{"op": "lock.acquire", "key": key, "holder": holder, "ttlMs": 600000}); r.Error != nil {
				t.Fatalf("acquire: %+v", r.Error)
			}
			locks := NewLocks(t.Context(), e.kv, e.clock, nil)
			if info, _ := locks.Inspect(t.Context(), key); info == nil {
				t.Fatal("the lock is not held")
			}
			if how == "input closed" {
				c.in.Close()
			} else {
				c.cancel()
			}
			if err := <-c.done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			c.done <- nil
			if info, err := locks.Inspect(t.Context(), key); info != nil || err != nil {
				t.Fatalf("after the agent ended the lock is %+v, %v; want released", info, err)
			}
		})
	}
}

// TestAgentBeats: a pull and a push that publishes send this host's position,
// as sync does.
func TestAgentBeats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cache := t.TempDir()
	beats := make(chan [2]ledger.Seq, 10)
	c := serveAgent(t, Config{Ports: ports{e: e, cache: cache, beats: beats}})
	if r := c.call(map[string]any{"op": "hello", "version": "v-test", "protocol": Protocol}); r.Error != nil {
		t.Fatalf("hello: %+v", r.Error)
	}
	if r := c.call(map[string]any{"op": "pull"}); r.Error != nil {
		t.Fatalf("pull: %+v", r.Error)
	}
	if b := <-beats; b != [2]ledger.Seq{0, 0} {
		t.Fatalf("beat after the pull of an empty ledger: %v", b)
	}
	p := filepath.Join(cache, "data", "t", "m", "result", "latest")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.call(map[string]any{"op": "push"}); r.Error != nil {
		t.Fatalf("push: %+v", r.Error)
	}
	if b := <-beats; b != [2]ledger.Seq{1, 1} {
		t.Fatalf("beat after a push of one commit: %v, want hwm 1, head 1", b)
	}
}

// TestDescribe: an answer's error names the ways out the command built
// (WaysOut), each where its meaning goes, never picked from a list by
// position; the texts are docs/swamp.md's.
func TestDescribe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, err := New(Config{Ports: ports{e: e}, WaysOut: waysOut{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err        error
		kind, want string
	}{
		{fmt.Errorf("push: %w", &host.ConflictError{Paths: []string{"a", "b"}}), "conflict",
			"syncledger: another host changed a, b too; this host's files are kept, uncommitted. Keep this host's version: resolve --mine a b; or the other host's: resolve --theirs a b"},
		{fmt.Errorf("pull: %w", &host.LocalChangesError{Paths: []string{"c"}}), "conflict",
			"syncledger: files changed here, not pushed, that the ledger changed too: c. Keep this host's version: resolve --mine c; or the ledger's: resolve --theirs c"},
		{checkProtocol(Protocol+1, "/r", "v9"), "version", fmt.Sprintf("the @syncledger/datastore extension in /r speaks agent protocol %d, newer than this syncledger binary's (v9: protocol %d): "+
			"install a newer syncledger on this host (one that speaks protocol %d); or, to take every host back to this binary's protocol, "+
			"run 'syncledger swamp setup --repo /r' with this binary and commit the extension it writes", Protocol+1, Protocol, Protocol+1)},
		{checkProtocol(Protocol-1, "/r", "v9"), "version", fmt.Sprintf("the @syncledger/datastore extension in /r speaks agent protocol %d, older than this syncledger binary's (v9: protocol %d): "+
			"run 'syncledger swamp setup --repo /r' with this binary to rewrite the extension, and commit it for the other hosts", Protocol-1, Protocol)},
		{&NamespaceError{Swamp: "ci", Config: ""}, "error",
			`syncledger: swamp's datastore namespace is "ci", but this datastore's syncledger config is for "": run 'syncledger swamp setup --repo DIR ci' (it rewrites the config)`},
		{fmt.Errorf("open: ledger %q: %w", "x", ledger.ErrNotFound), "no-ledger",
			`syncledger: open: ledger "x": not found (create the ledger with 'syncledger init', or fix "ledger" in the datastore config of .swamp.yaml)`},
		{fmt.Errorf("lock .datastore.lock: create k: %w: %w", ledger.ErrUnreachable, context.DeadlineExceeded), "unreachable",
			`syncledger: cannot reach NATS: lock .datastore.lock: create k: server unreachable: context deadline exceeded (the server is "nats" in the datastore config of .swamp.yaml)`},
		{fmt.Errorf("commit: %w", &host.PartialCommitError{Err: &ledger.LockLostError{Lock: "data/t/m/.lock", Fence: 3, Last: 9,
			Taker: &ledger.FenceRecord{Host: "b", Holder: "bob@desk (pid 7)", At: time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)}}}), "lock-lost",
			"syncledger: swamp's lock data/t/m/.lock was lost: bob@desk (pid 7) on host b at 2026-12-03T20:00:00Z took it after this host held it " +
				"past its TTL without renewing it (a suspended or stopped machine, a network cut), so that host may have run the same model meanwhile; " +
				"nothing of this command was published (lock lost)"},
		{&host.WaitError{Wait: host.Wait{Op: "commit", On: "blobs", What: "to store content", For: time.Minute, Limit: time.Minute}, Err: context.Canceled}, "unreachable",
			"syncledger: commit: gave up after waiting 1m0s for the blob store to store content: context canceled: nothing more was published: " +
				"the changes not published stay uncommitted in the cache, for the next swamp command (or 'swamp datastore sync'); " +
				"see that the blob store is up and reachable from this host (a network cut, a proxy or an endpoint that hangs)"},
		// The words alone do not make a server unreachable.
		{errors.New("connection refused"), "error", "syncledger: connection refused"},
	} {
		f := a.describe(tc.err)
		if f.Kind != tc.kind || f.Message != tc.want {
			t.Errorf("describe(%v) = %+v, want kind %s, message\n%s", tc.err, f, tc.kind, tc.want)
		}
	}
}

// TestDescribeServerFull: a write the server refused for lack of space is
// answered with what the server says of its disk (asked through the ports:
// a blob put's refusal does not know it) and the way out.
func TestDescribeServerFull(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.full = &ledger.ServerState{Full: true, Dir: "/srv/data", Free: 10, Size: 1000, Reserve: 100, Resume: 150}
	a, err := New(Config{Ports: ports{e: e}, WaysOut: waysOut{}})
	if err != nil {
		t.Fatal(err)
	}
	err = a.withServerState(t.Context(), fmt.Errorf("push: put blob b: %w", &ledger.ServerFullError{}))
	f := a.describe(err)
	want := "syncledger: push: put blob b: the server's disk is full (/srv/data has 10 B free of 1000 B; the server refuses writes below 100 B free and takes them again at 150 B): " +
		"free 140 bytes on the server's /srv/data, then run this again"
	if f.Kind != "error" || f.Message != want {
		t.Errorf("describe = %+v, want message\n%s", f, want)
	}
}

// TestCacheWaitEndsWithContext: a request waiting for the cache while
// another operation holds it gives up when its context ends.
func TestCacheWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, err := New(Config{Ports: ports{e: e, cache: t.TempDir()}, WaysOut: waysOut{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.lockHost(t.Context()); err != nil { // another operation runs
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := a.verify(ctx, VerifyRequest{})
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("verify returned while the cache was held: %v", err)
	default:
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("verify after its context ended: %v, want context.Canceled", err)
	}
	a.unlockHost()
	if _, err := a.verify(t.Context(), VerifyRequest{}); err != nil {
		t.Fatalf("verify with the cache free: %v", err)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/swamp/agent"
)

// The swamp agent opens the cache (Host → Log → Conn, Blobs), the swamp bucket
// (KV → Conn) and the blob store (a hint's Blobs) from goroutines of its own, at
// once. app cached the connection, the log and the blob store without a lock
// (issue 26 point 12): under -race this test failed on the first run. Here the
// agent runs in-process, every request sent before any is answered, so that
// each is handled on its own goroutine beside the agent's opening of the cache;
// .ci/run runs it with -race.
func TestAgentConcurrentOpens(t *testing.T) {
	t.Parallel()
	srv, _ := natsjstest.RunServer(t)
	env := map[string]string{
		"SYNCLEDGER_NATS":      srv.ClientURL(),
		"SYNCLEDGER_LEDGER":    "agentrace",
		"SYNCLEDGER_LOG_LEVEL": "warn",
		"XDG_CONFIG_HOME":      t.TempDir(),
	}
	if code, _, stderr := swampRun(t, env, nil, "init", "--blobs", "file://"+t.TempDir()); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, stderr)
	}
	cache := t.TempDir()
	put(t, cache, "models/a", "a")

	reqs := []map[string]any{
		{"id": 1, "op": "hello", "protocol": agent.Protocol},
		{"id": 2, "op": "pull"},
		{"id": 3, "op": "cp.list", "prefix": ""},
		{"id": 4, "op": "lock.inspect", "key": "k"},
		{"op": "hint", "hints": []string{"models"}},
		{"op": "hint", "hints": []string{"models"}}, // starts the work of the first: Blobs on a goroutine
		{"id": 5, "op": "verify"},
		{"id": 6, "op": "cp.list", "prefix": ""},
		{"id": 7, "op": "pull"},
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	a := newApp(outW, &stderr, func(k string) string { return env[k] })
	root := newRootCmd(a)
	root.SetArgs([]string{"--cache", cache, "swamp", "agent"})
	root.SetIn(inR)
	root.SetOut(outW)
	root.SetErr(&stderr)
	done := make(chan error, 1)
	go func() {
		defer a.close()
		err := root.ExecuteContext(ctx)
		outW.Close()
		done <- err
	}()
	// Every request goes out before any answer is read: the agent handles each
	// on a goroutine of its own, while it opens the cache on another.
	enc := json.NewEncoder(inW)
	for _, r := range reqs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int64]agent.Response{}
	sc := bufio.NewScanner(outR)
	for len(got) < 7 && sc.Scan() {
		var r agent.Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		got[r.ID] = r
	}
	inW.Close() // the agent ends with its input
	go io.Copy(io.Discard, outR)
	if err := <-done; err != nil {
		t.Fatalf("swamp agent: %v\n%s", err, stderr.String())
	}
	for id := int64(1); id <= 7; id++ {
		r, ok := got[id]
		switch {
		case !ok:
			t.Errorf("request %d: no response", id)
		case r.Error != nil:
			t.Errorf("request %d: %s: %s", id, r.Error.Kind, r.Error.Message)
		}
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
}

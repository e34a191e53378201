package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestInitRaisesLogFormat: a ledger made by a release before fences (log
// format 1) works as before; init on it says that swamp's locks are not
// fenced and how to raise it; init --format 2 raises it, after which a
// build that reads format 1 only would refuse it.
func TestInitRaisesLogFormat(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "old")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	c.setFormat("old", "1")
	cache := t.TempDir()
	c.ok("--cache", cache, "sync")
	put(t, cache, "audit/one", "1")
	c.ok("--cache", cache, "commit")
	if st := c.status(cache); st.Head != 1 || st.HWM != 1 {
		t.Fatalf("status of the format-1 ledger after a commit: %+v", st)
	}
	r := c.run("init")
	if r.code != 0 || !strings.Contains(r.stderr, "log format 1: swamp's locks are not fenced") || !strings.Contains(r.stderr, "init --format 2") {
		t.Fatalf("init on a format-1 ledger: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("init", "--format", "3"); r.code != exitUsage {
		t.Fatalf("init --format 3: exit %d, want usage\n%s", r.code, r.stderr)
	}
	c.ok("init", "--format", "2")
	if got := c.format("old"); got != "2" {
		t.Fatalf("format after init --format 2: %q", got)
	}
	if r := c.run("init"); r.code != 0 || strings.Contains(r.stderr, "not fenced") {
		t.Fatalf("init on a format-2 ledger: exit %d\n%s", r.code, r.stderr)
	}
	c.ok("init", "--format", "2") // again: nothing to do
}

// setFormat and format write and read a ledger's log format (the stream's
// metadata) as a release before fences left it.
func (c *shell) setFormat(ledgerName, f string) {
	c.t.Helper()
	js := c.jetStream()
	st, err := js.Stream(c.t.Context(), "SYNCLEDGER_"+ledgerName)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Metadata["syncledger.format"] = f
	if _, err := js.UpdateStream(c.t.Context(), cfg); err != nil {
		c.t.Fatal(err)
	}
}

func (c *shell) format(ledgerName string) string {
	c.t.Helper()
	st, err := c.jetStream().Stream(c.t.Context(), "SYNCLEDGER_"+ledgerName)
	if err != nil {
		c.t.Fatal(err)
	}
	return st.CachedInfo().Config.Metadata["syncledger.format"]
}

func (c *shell) jetStream() jetstream.JetStream {
	c.t.Helper()
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return js
}

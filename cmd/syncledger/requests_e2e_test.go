package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestNoopSyncRequests: a no-op sync is one request to the server, its
// STREAM.INFO (issue 17; B11 and B12 measure it), whoever builds the
// connection and checks the stream's configuration (issue 41: the check reads
// that same answer).
func TestNoopSyncRequests(t *testing.T) {
	t.Parallel()
	srv, _ := natsjstest.RunServer(t)
	env := cliEnv("SYNCLEDGER_NATS="+srv.ClientURL(), "SYNCLEDGER_LEDGER=requests")
	if r := cli(t, env, "init", "--blobs", "file://"+t.TempDir()); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	cache := t.TempDir()
	put(t, cache, "models/a", "a")
	for _, args := range [][]string{{"commit"}, {"sync"}} {
		if r := cli(t, env, append([]string{"--cache", cache}, args...)...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}

	spy := natsjstest.Connect(t, srv.ClientURL())
	var got []string
	msgs := make(chan *nats.Msg, 64)
	for _, subj := range []string{"$JS.API.>", "$KV.>", "syncledger.>"} {
		if _, err := spy.ChanSubscribe(subj, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	// The beat of the sync before is less than 10 s old: this one sends none.
	if r := cli(t, env, "--cache", cache, "sync"); r.code != 0 {
		t.Fatalf("sync: %+v", r)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		select {
		case m := <-msgs:
			got = append(got, m.Subject)
		case <-time.After(100 * time.Millisecond):
			done = true
		}
	}
	if want := "$JS.API.STREAM.INFO.SYNCLEDGER_requests"; len(got) != 1 || got[0] != want {
		t.Fatalf("a no-op sync sent %d messages:\n%s\nwant one, %s", len(got), strings.Join(got, "\n"), want)
	}
}

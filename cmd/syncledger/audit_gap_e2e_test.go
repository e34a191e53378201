package main

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/ledger"
)

// TestAuditGapCLI: the audit consumer's durable position is moved past seq 2
// (a reset, as a tooling credential may send). `consume audit` refuses to
// record seq 3 after seq 1 (exit 1, naming seq 2) and prints its ways out; the
// first, followed as printed, ends with every commit in the file once.
func TestAuditGapCLI(t *testing.T) {
	t.Parallel()
	l := newServerLedger(t, "default")
	env := consumeEnv(l)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l.Commit(t, "a")
	p := startProc(t, env, "consume", "audit", "--file", path)
	consumertest.Wait(t, 30*time.Second, "seq 1 audited", func() bool { return len(auditSeqs(t, path)) == 1 })
	p.stop(t, syscall.SIGTERM)
	l.Commit(t, "a")
	l.Commit(t, "a")
	js, err := jetstream.New(l.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.ResetConsumerToSequence(t.Context(), ledger.StreamName(l.Name), "audit", 3); err != nil {
		t.Fatal(err)
	}
	r := cli(t, env, "consume", "audit", "--file", path)
	if r.code != 1 || !strings.Contains(r.stderr, "seqs [2] between hold commits it was not given") {
		t.Fatalf("consume audit past a moved position: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := auditSeqs(t, path); !slices.Equal(got, []ledger.Seq{1}) {
		t.Fatalf("audit file after the refusal: %v, want [1]", got)
	}
	var way string
	for _, line := range strings.Split(r.stderr, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "way out: "); ok {
			way = c
			break
		}
	}
	steps := strings.Split(way, " && ")
	if len(steps) != 2 {
		t.Fatalf("first way out %q: want a delete, then the consumer again", way)
	}
	args := func(cmd string) []string { return strings.Fields(strings.TrimPrefix(cmd, "syncledger ")) }
	if r := cli(t, env, args(steps[0])...); r.code != 0 {
		t.Fatalf("%s: exit %d, stderr:\n%s", steps[0], r.code, r.stderr)
	}
	p = startProc(t, env, args(steps[1])...)
	consumertest.Wait(t, 30*time.Second, "seqs 2 and 3 audited", func() bool { return len(auditSeqs(t, path)) == 3 })
	p.stop(t, syscall.SIGTERM)
	if got := auditSeqs(t, path); !slices.Equal(got, []ledger.Seq{1, 2, 3}) {
		t.Errorf("audit file after the way out: %v, want [1 2 3]", got)
	}
}

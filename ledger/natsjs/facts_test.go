package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// The server behaviour Append is built on, pinned so that a server upgrade that
// changes it fails here first. Measured on nats-server 2.15.2.
// (The R3 answers are checked in TestCluster.)
func TestServerAnswers(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t)
	checkAnswers(t, l, nc, false)
}

func checkAnswers(t *testing.T, l *Log, nc *nats.Conn, replicated bool) {
	ctx := testCtx(t)
	encode := func(evs []ledger.Event) *commit {
		c, err := prepareCommit(l, evs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	raw := func(c *commit) error {
		t.Helper()
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, err := l.d.publish(pctx, c)
		return err
	}

	// Expected last subject seq 0 on a subject holding a message: refused with
	// 10071 naming the subject's last seq.
	first := encode(mkCommit(t, l, part{partition: "m", modelSeq: 1}))
	if err := raw(first); err != nil {
		t.Fatal(err)
	}
	err := raw(encode(mkCommit(t, l, part{partition: "m", modelSeq: 1})))
	if code, _ := apiCode(err); code != codeWrongLastSeq || !strings.Contains(err.Error(), "wrong last sequence: 1") {
		t.Fatalf("expected seq 0 on a non-empty subject: %v, want 10071 naming seq 1", err)
	}

	// Retry of a stored message: one node re-checks the expected seq first
	// (10071); replicas answer a duplicate ack.
	err = raw(first)
	var dup errDuplicateAck
	switch code, _ := apiCode(err); {
	case !replicated && code != codeWrongLastSeq:
		t.Fatalf("single node, retry of a stored message: %v, want 10071", err)
	case replicated && !(errors.As(err, &dup) && dup.seq == 1):
		t.Fatalf("R3, retry of a stored message: %v, want a duplicate ack of seq 1", err)
	}

	// Retry of a stored batch: 10201 on both.
	batch := encode(mkCommit(t, l, part{partition: "a", modelSeq: 1}, part{partition: "b", modelSeq: 1}, part{partition: "c", modelSeq: 1}))
	if err := raw(batch); err != nil {
		t.Fatal(err)
	}
	err = raw(batch)
	if code, _ := apiCode(err); code != codeBatchDupMsgID {
		t.Fatalf("retry of a stored batch: %v, want 10201", err)
	}

	// A batch whose third message breaks its chain: 10071 naming that
	// partition's last seq (not its subject), nothing stored.
	last := lastSeq(t, l)
	stale := encode(mkCommit(t, l, part{partition: "x", modelSeq: 1}, part{partition: "y", modelSeq: 1}, part{partition: "m", modelSeq: 1}))
	err = raw(stale)
	if code, _ := apiCode(err); code != codeWrongLastSeq || !strings.Contains(err.Error(), "wrong last sequence: 1") {
		t.Fatalf("batch with a stale third part: %v, want 10071 naming seq 1", err)
	}
	if s := lastSeq(t, l); s != last {
		t.Fatalf("refused batch moved the last seq from %d to %d", last, s)
	}

	// Fences (ledger.Fence): a batch's message may expect the last seq of
	// another subject (Nats-Expected-Last-Subject-Sequence-Subject), checked
	// inside the atomic batch. A fence record, then a commit of one event and
	// its fence check: stored while the fence holds, at consecutive seqs.
	rec := ledger.FenceRecord{V: ledger.FormatVersion, Ledger: l.d.uuid, Lock: "data/t/m/.lock", ID: mkCommit(t, l, part{partition: "f", modelSeq: 1})[0].Commit, Host: "h", At: time.Now()}
	fseq, err := l.TakeFence(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	fenced := func() *commit {
		c, err := prepareCommit(l, mkCommit(t, l, next(t, l, "f")), []ledger.Fence{{Lock: rec.Lock, Seq: fseq}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	held := fenced()
	if err := raw(held); err != nil {
		t.Fatalf("a commit under a fence that holds: %v", err)
	}
	if s := lastSeq(t, l); s != fseq+2 {
		t.Fatalf("a commit of one event under one fence: last seq %d, want %d", s, fseq+2)
	}
	// A retry of it: 10201, as any stored batch.
	if code, _ := apiCode(raw(held)); code != codeBatchDupMsgID {
		t.Fatalf("retry of a stored fenced batch: %v, want 10201", err)
	}
	// Another holder's fence record: the batch is refused with 10071 naming
	// the fence subject's last seq, nothing stored.
	rec.ID, rec.Host = mkCommit(t, l, part{partition: "f", modelSeq: 1})[0].Commit, "other"
	taken, err := l.TakeFence(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	err = raw(fenced())
	if code, _ := apiCode(err); code != codeWrongLastSeq || !strings.Contains(err.Error(), fmt.Sprintf("wrong last sequence: %d", taken)) {
		t.Fatalf("a commit under a fence taken since: %v, want 10071 naming seq %d", err, taken)
	}
	if s := lastSeq(t, l); s != taken {
		t.Fatalf("refused fenced batch moved the last seq from %d to %d", taken, s)
	}
}

// TestBatchKeyedByID pins why a batch's id must stay secret until the batch
// is stored (publishBatch's random ids; natsauth: no role below the admin
// subscribes to the ledger's publish subjects): the server keys an atomic
// batch in flight by its id alone. A message of another connection with the
// id, the next sequence and a commit closes the batch with that message —
// the writer's first parts stored beside it, its own later parts refused.
func TestBatchKeyedByID(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	l, err := CreateLog(ctx, nc, LedgerConfig{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	evs := mkCommit(t, l, part{partition: "a", modelSeq: 1}, part{partition: "b", modelSeq: 1}, part{partition: "c", modelSeq: 1})
	c, err := prepareCommit(l, evs, nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(conn *nats.Conn, m *nats.Msg, id string, seq int, commit bool) *nats.Msg {
		t.Helper()
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(seq))
		if commit {
			m.Header.Set(batchCommitHeader, "1")
		}
		resp, err := conn.RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const id = "known"
	send(nc, l.d.msg(c, 0), id, 1, false)
	intruder := nats.NewMsg(ledger.Subject("test", "x"))
	intruder.Data = []byte("intruder")
	if resp := send(other, intruder, id, 2, true); !strings.Contains(string(resp.Data), `"count":2`) {
		t.Fatalf("the intruder's commit: %s", resp.Data)
	}
	if resp := send(nc, l.d.msg(c, 1), id, 2, false); !strings.Contains(string(resp.Data), "error") {
		t.Fatalf("the writer's part 2 after the intruder's commit: %s", resp.Data)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, StreamName("test"))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 2 {
		t.Fatalf("%d messages stored, want the writer's part 1 and the intruder's", n)
	}
}

package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// The server enforces Nats-Expected-Last-Subject-Sequence: 0 as "the subject
// has no message yet".
func TestExpectedZeroMeansEmpty(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	first := commitNext(t, l, "m")
	_, err := l.Append(ctx, mkCommit(t, l, part{partition: "m", modelSeq: 1}))
	var ce *ledger.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ledger.ErrConflict) || *ce != (ledger.ConflictError{Partition: "m", Expected: 0, Actual: first[0]}) {
		t.Fatalf("second modelSeq-1 append = %v, want ConflictError{m 0 %d}", err, first[0])
	}
	// A Prev that is not the partition's last seq (here: another partition's seq,
	// and a seq from the future) is a conflict too.
	o := commitNext(t, l, "o")
	for _, prev := range []ledger.Seq{o[0], 99} {
		_, err = l.Append(ctx, mkCommit(t, l, part{partition: "m", modelSeq: 2, prev: prev}))
		if !errors.As(err, &ce) || *ce != (ledger.ConflictError{Partition: "m", Expected: prev, Actual: first[0]}) {
			t.Fatalf("append with prev %d = %v, want ConflictError{m %d %d}", prev, err, prev, first[0])
		}
	}
	if s := lastSeq(t, l); s != o[0] {
		t.Fatalf("last seq %d after refused appends, want %d", s, o[0])
	}
}

// Two committers extend the same partition from the same head: exactly one
// wins, the other gets a ConflictError naming the winner's seq; the chain has no
// gap and no duplicate.
func TestConcurrentCommitters(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	a, err := CreateLog(ctx, nc, LedgerConfig{Name: "race"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenLog(ctx, natsjstest.Connect(t, nc.ConnectedUrl()), "race")
	if err != nil {
		t.Fatal(err)
	}
	raceRounds(t, a, b, 50)
}

func raceRounds(t *testing.T, a, b *Log, rounds int) {
	ctx := testCtx(t)
	logs := []*Log{a, b}
	p := part{partition: "m", modelSeq: 1} // tracked here: a replica's head may lag
	for round := range rounds {
		commits := [][]ledger.Event{mkCommit(t, a, p), mkCommit(t, b, p)}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			seqs  [2][]ledger.Seq
			errs  [2]error
		)
		for i := range logs {
			wg.Go(func() {
				<-start
				seqs[i], errs[i] = logs[i].Append(ctx, commits[i])
			})
		}
		close(start)
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: errors %v and %v, want exactly one winner", round, errs[0], errs[1])
		}
		win, lose := 0, 1
		if errs[0] != nil {
			win, lose = 1, 0
		}
		var ce *ledger.ConflictError
		if !errors.As(errs[lose], &ce) {
			t.Fatalf("round %d: loser's error %v, want a ConflictError", round, errs[lose])
		}
		if want := (ledger.ConflictError{Partition: "m", Expected: p.prev, Actual: seqs[win][0]}); *ce != want {
			t.Fatalf("round %d: %+v, want %+v", round, *ce, want)
		}
		p.modelSeq, p.prev = p.modelSeq+1, seqs[win][0]
	}
	rs := readPartition(t, a, "m", 1)
	if len(rs) != rounds {
		t.Fatalf("%d events in the partition, want %d", len(rs), rounds)
	}
	checkChain(t, rs)
	if s := lastSeq(t, a); s != ledger.Seq(rounds) {
		t.Fatalf("last seq %d, want %d (a loser stored something)", s, rounds)
	}
}

// Concurrent multi-partition commits that share one partition: one wins, the
// other stores nothing, on any of its partitions.
func TestConcurrentBatches(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	const rounds = 20
	for round := range rounds {
		x, y, z := next(t, l, "x"), next(t, l, "y"), next(t, l, "z")
		commits := [][]ledger.Event{mkCommit(t, l, x, y), mkCommit(t, l, y, z)}
		before := lastSeq(t, l)
		var (
			wg   sync.WaitGroup
			errs [2]error
		)
		for i := range commits {
			wg.Go(func() { _, errs[i] = l.Append(ctx, commits[i]) })
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: errors %v and %v, want exactly one winner", round, errs[0], errs[1])
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, ledger.ErrConflict) {
				t.Fatalf("round %d: %v, want ErrConflict", round, err)
			}
		}
		if s := lastSeq(t, l); s != before+2 {
			t.Fatalf("round %d: last seq %d, want %d", round, s, before+2)
		}
	}
	for _, p := range []string{"x", "y", "z"} {
		checkChain(t, readPartition(t, l, p, 1))
	}
	if n := len(readPartition(t, l, "y", 1)); n != rounds {
		t.Fatalf("partition y has %d events, want %d", n, rounds)
	}
}

// A commit over 3 partitions whose third message would break its chain stores
// nothing.
func TestBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	commitNext(t, l, "a", "b", "c")
	c := next(t, l, "c")
	commitNext(t, l, "c") // c moves on: the commit below carries a stale Prev for c
	before := lastSeq(t, l)

	evs := mkCommit(t, l, next(t, l, "a"), next(t, l, "b"), c)
	_, err := l.Append(ctx, evs)
	var ce *ledger.ConflictError
	if !errors.As(err, &ce) || *ce != (ledger.ConflictError{Partition: "c", Expected: c.prev, Actual: before}) {
		t.Fatalf("Append = %v, want ConflictError{c %d %d}", err, c.prev, before)
	}
	if s := lastSeq(t, l); s != before {
		t.Fatalf("last seq %d, want %d: part of the batch was stored", s, before)
	}
	for _, p := range []string{"a", "b"} {
		if rs := readPartition(t, l, p, 1); len(rs) != 1 {
			t.Fatalf("partition %s has %d events, want 1", p, len(rs))
		}
	}
	for _, r := range readAll(t, l, 1, 0) {
		if r.Event.Commit == evs[0].Commit {
			t.Fatalf("seq %d holds a part of the refused commit", r.Seq)
		}
	}
	// The same commit, with c's chain fixed, goes in at consecutive seqs.
	evs[2].ModelSeq, evs[2].Prev = c.modelSeq+1, before
	seqs, err := l.Append(ctx, evs)
	if err != nil || !cmp.Equal(seqs, []ledger.Seq{before + 1, before + 2, before + 3}) {
		t.Fatalf("Append = %v, %v", seqs, err)
	}
}

// A client that never saw the ack publishes the same events again: the log
// returns the stored seqs and holds one copy — for a single message (which one
// node answers "wrong last sequence") and a batch (answered "duplicate message
// id"), also after other commits extended the partitions.
func TestRetryAfterLostAck(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	for _, partitions := range [][]string{{"s"}, {"a", "b", "c"}} {
		name := strings.Join(partitions, ",")
		parts := make([]part, len(partitions))
		for i, p := range partitions {
			parts[i] = next(t, l, p)
		}
		evs := mkCommit(t, l, parts...)
		seqs, err := l.Append(ctx, evs)
		if err != nil {
			t.Fatalf("%s: Append: %v", name, err)
		}
		last := lastSeq(t, l)
		again, err := l.Append(ctx, evs)
		if err != nil || !cmp.Equal(again, seqs) {
			t.Fatalf("%s: Append again = %v, %v; want %v", name, again, err, seqs)
		}
		if s := lastSeq(t, l); s != last {
			t.Fatalf("%s: last seq %d after the retry, want %d", name, s, last)
		}
		// Others extend the partitions; the retry still finds the commit.
		commitNext(t, l, partitions...)
		last = lastSeq(t, l)
		again, err = l.Append(ctx, evs)
		if err != nil || !cmp.Equal(again, seqs) {
			t.Fatalf("%s: Append after others = %v, %v; want %v", name, again, err, seqs)
		}
		if s := lastSeq(t, l); s != last {
			t.Fatalf("%s: last seq %d after the late retry, want %d", name, s, last)
		}
		n := 0
		for _, r := range readAll(t, l, 1, 0) {
			if r.Event.Commit == evs[0].Commit {
				n++
			}
		}
		if n != len(evs) {
			t.Fatalf("%s: %d messages of the commit in the stream, want %d", name, n, len(evs))
		}
	}
}

// A caller whose context ends before the ack learns that the outcome is
// unknown (the driver's publish, its context ending as it sends); one whose
// context is done before the Append is refused before anything is sent
// (ledger.Log), the outcome known; appending to a deleted ledger is
// ErrNotFound.
func TestAppendOutcomes(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t, WithRetry(3, time.Millisecond), WithTimeout(time.Second))
	ctx := testCtx(t)
	evs := mkCommit(t, l, part{partition: "m", modelSeq: 1})
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(done, evs); !errors.Is(err, context.Canceled) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Append(cancelled ctx) = %v, want context.Canceled, the outcome known", err)
	}
	if b, _ := l.Bounds(ctx); b.Last != 0 {
		t.Fatalf("after Append(cancelled ctx) the stream's last seq is %d, want nothing stored", b.Last)
	}
	batch, err := ledger.NewAppendBatch(l.d.info, evs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.d.Append(done, batch); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the driver's Append(cancelled ctx) = %v, want ErrOutcomeUnknown and context.Canceled", err)
	}
	if err := l.d.js.DeleteStream(ctx, l.Stream()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := l.Append(ctx, evs); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Append to a deleted ledger = %v, want ErrNotFound", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Append took %v", d)
	}
}

func TestAppendLimits(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t)
	ctx := testCtx(t)

	// More partitions than one atomic batch may hold: refused, naming the limit.
	parts := make([]part, ledger.MaxBatch+1)
	for i := range parts {
		parts[i] = part{partition: fmt.Sprintf("p%04d", i), modelSeq: 1}
	}
	_, err := l.Append(ctx, mkCommit(t, l, parts...))
	if !errors.Is(err, ledger.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(ledger.MaxBatch)) {
		t.Fatalf("Append(%d partitions) = %v, want ErrTooLarge naming %d", len(parts), err, ledger.MaxBatch)
	}
	if s := lastSeq(t, l); s != 0 {
		t.Fatalf("last seq %d after a refused commit", s)
	}

	// Exactly the limit works, and so does 200.
	for _, k := range []int{ledger.MaxBatch, 200} {
		before := lastSeq(t, l)
		parts := make([]part, k)
		for i := range parts {
			parts[i] = next(t, l, fmt.Sprintf("p%04d", i))
		}
		seqs, err := l.Append(ctx, mkCommit(t, l, parts...))
		if err != nil {
			t.Fatalf("Append(%d partitions): %v", k, err)
		}
		if len(seqs) != k || seqs[0] != before+1 || seqs[k-1] != before+ledger.Seq(k) {
			t.Fatalf("Append(%d partitions): seqs %d..%d (%d), want %d..%d", k, seqs[0], seqs[len(seqs)-1], len(seqs), before+1, before+ledger.Seq(k))
		}
	}

	// A partition key whose subject the server could not take is refused; the
	// connection survives.
	long := strings.Repeat(".", MaxSubjectLen/3)
	_, err = l.Append(ctx, mkCommit(t, l, part{partition: long, modelSeq: 1, entries: []ledger.Entry{entry(long + "/f")}}))
	if !errors.Is(err, ledger.ErrTooLarge) {
		t.Fatalf("Append(long partition) = %v, want ErrTooLarge", err)
	}
	if s, err := l.PartitionLastSeq(ctx, long); s != 0 || err != nil {
		t.Fatalf("PartitionLastSeq(long) = %d, %v", s, err)
	}
	if !nc.IsConnected() {
		t.Fatal("connection lost")
	}

	// An event over the server's max payload.
	big := make([]ledger.Entry, 0, 6000)
	for i := range cap(big) {
		big = append(big, entry(fmt.Sprintf("big/%0150d", i)))
	}
	_, err = l.Append(ctx, mkCommit(t, l, part{partition: "big", modelSeq: 1, entries: big}))
	if !errors.Is(err, ledger.ErrTooLarge) {
		t.Fatalf("Append(huge event) = %v, want ErrTooLarge", err)
	}
}

func TestAppendValidation(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	good := func() []ledger.Event {
		return mkCommit(t, l, part{partition: "a", modelSeq: 1}, part{partition: "b", modelSeq: 1})
	}
	for _, tc := range []struct {
		name   string
		mutate func([]ledger.Event) []ledger.Event
		want   error
	}{
		{"empty", func([]ledger.Event) []ledger.Event { return nil }, ledger.ErrInvalid},
		{"parts", func(e []ledger.Event) []ledger.Event { e[1].Parts = 3; return e }, ledger.ErrInvalid},
		{"order", func(e []ledger.Event) []ledger.Event { e[0], e[1] = e[1], e[0]; return e }, ledger.ErrInvalid},
		{"commit", func(e []ledger.Event) []ledger.Event { e[1].Commit = newCommitID(t); return e }, ledger.ErrInvalid},
		{"duplicate partition", func(e []ledger.Event) []ledger.Event {
			e[1].Partition, e[1].Entries = "a", []ledger.Entry{entry("a/other")}
			return e
		}, ledger.ErrInvalid},
		{"lineage", func(e []ledger.Event) []ledger.Event {
			for i := range e {
				e[i].Ledger = "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b"
			}
			return e
		}, ledger.ErrLineage},
		{"bad event", func(e []ledger.Event) []ledger.Event { e[1].ModelSeq = 0; return e }, ledger.ErrInvalid},
		{"version", func(e []ledger.Event) []ledger.Event { e[0].V = 2; return e }, ledger.ErrUnknownVersion},
	} {
		if _, err := l.Append(ctx, tc.mutate(good())); !errors.Is(err, tc.want) {
			t.Errorf("%s: Append = %v, want %v", tc.name, err, tc.want)
		}
	}
	if s := lastSeq(t, l); s != 0 {
		t.Fatalf("last seq %d after refused appends", s)
	}
}

// A single commit of 100,000 small files over 200 partitions, entries grouped by
// partition, entry lists too large to inline moved to manifests.
func TestHundredThousandFiles(t *testing.T) {
	t.Parallel()
	l, _ := newLedger(t)
	ctx := testCtx(t)
	const files, partitions = 100_000, 200
	byPartition := make(map[string][]ledger.Entry, partitions)
	var keys []string
	for i := range files {
		// Partition 0 holds a tenth of the files (its list goes to a manifest);
		// the others share the rest (inline).
		m := 0
		if i >= files/10 {
			m = 1 + i%(partitions-1)
		}
		path := fmt.Sprintf("data/aws/ec2/vpc/m%03d/state/1/f%06d", m, i)
		key := ledger.PartitionKey(path)
		if _, ok := byPartition[key]; !ok {
			keys = append(keys, key)
		}
		byPartition[key] = append(byPartition[key], entry(path))
	}
	if len(keys) != partitions {
		t.Fatalf("%d partitions", len(keys))
	}
	parts := make([]part, len(keys))
	for i, k := range keys {
		parts[i] = part{partition: k, modelSeq: 1, entries: byPartition[k]}
	}
	evs := mkCommit(t, l, parts...)
	manifests := map[ledger.Digest]int{}
	for i, e := range evs {
		out, m, err := ledger.Externalize(e)
		if err != nil {
			t.Fatalf("Externalize part %d: %v", i+1, err)
		}
		if m != nil {
			manifests[out.Manifest] = len(e.Entries)
		}
		evs[i] = out
	}
	if len(manifests) != 1 {
		t.Fatalf("%d manifests, want 1 (partition 0's)", len(manifests))
	}
	start := time.Now()
	seqs, err := l.Append(ctx, evs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	t.Logf("appended %d files in %d events in %v", files, len(evs), time.Since(start))
	if len(seqs) != partitions || seqs[0] != 1 || seqs[partitions-1] != partitions {
		t.Fatalf("seqs %v", seqs)
	}
	n := 0
	for _, r := range readAll(t, l, 1, 0) {
		if r.Event.Commit != evs[0].Commit || r.Event.Part != int(r.Seq) {
			t.Fatalf("seq %d: %+v", r.Seq, r.Event)
		}
		if r.Event.Manifest.IsZero() {
			n += len(r.Event.Entries)
		} else {
			n += manifests[r.Event.Manifest]
		}
	}
	if n != files {
		t.Fatalf("%d files read back, want %d", n, files)
	}
}

// On a three-node cluster (one, shared by the subtests: forming it takes up to
// several seconds): the server's answers, retries, and racing committers
// connected to different servers. Each subtest has its own stream, so they run
// at once.
func TestCluster(t *testing.T) {
	t.Parallel()
	servers, nc := natsjstest.RunCluster(t, 3)
	create := func(t *testing.T, name string) *Log {
		l, err := CreateLog(testCtx(t), nc, LedgerConfig{Name: name, Replicas: 3})
		if err != nil {
			t.Fatalf("Create R3: %v", err)
		}
		if info, err := l.Info(testCtx(t)); err != nil || info.Replicas != 3 {
			t.Fatalf("Info = %+v, %v", info, err)
		}
		return l
	}
	t.Run("ServerAnswers", func(t *testing.T) {
		t.Parallel()
		checkAnswers(t, create(t, "answers"), nc, true)
	})
	t.Run("Fenced", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		l := create(t, "fenced")
		take := func(host string) ledger.Fence {
			id := mkCommit(t, l, part{partition: "x", modelSeq: 1})[0].Commit
			seq, err := l.TakeFence(ctx, ledger.FenceRecord{V: ledger.FormatVersion, Ledger: l.d.uuid, Lock: "m", ID: id, Host: host, At: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			return ledger.Fence{Lock: "m", Seq: seq}
		}
		fa := take("a")
		if _, err := l.Append(ctx, mkCommit(t, l, next(t, l, "s")), fa); err != nil {
			t.Fatalf("fenced Append on R3: %v", err)
		}
		take("b")
		_, err := l.Append(ctx, mkCommit(t, l, next(t, l, "s")), fa)
		var le *ledger.LockLostError
		if !errors.As(err, &le) || le.Taker == nil || le.Taker.Host != "b" {
			t.Fatalf("Append under a lost fence on R3 = %v, want a LockLostError naming host b", err)
		}
	})
	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		l := create(t, "retry")
		single := mkCommit(t, l, next(t, l, "s"))
		seqs, err := l.Append(ctx, single)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		again, err := l.Append(ctx, single)
		if err != nil || !cmp.Equal(again, seqs) {
			t.Fatalf("Append again = %v, %v; want %v", again, err, seqs)
		}
		batch := mkCommit(t, l, next(t, l, "a"), next(t, l, "b"), next(t, l, "c"))
		bseqs, err := l.Append(ctx, batch)
		if err != nil {
			t.Fatalf("Append batch: %v", err)
		}
		again, err = l.Append(ctx, batch)
		if err != nil || !cmp.Equal(again, bseqs) {
			t.Fatalf("Append batch again = %v, %v; want %v", again, err, bseqs)
		}
		_, err = l.Append(ctx, mkCommit(t, l, part{partition: "s", modelSeq: 1}))
		if !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("stale append = %v, want ErrConflict", err)
		}
		if s := lastSeq(t, l); s != 4 {
			t.Fatalf("last seq %d, want 4", s)
		}
		if rs := readAll(t, l, 1, 0); len(rs) != 4 {
			t.Fatalf("Read: %d records", len(rs))
		}
		checkChain(t, readPartition(t, l, "s", 1))
	})
	t.Run("ConcurrentCommitters", func(t *testing.T) {
		t.Parallel()
		a := create(t, "race")
		b, err := OpenLog(testCtx(t), natsjstest.Connect(t, servers[2].ClientURL()), "race")
		if err != nil {
			t.Fatal(err)
		}
		raceRounds(t, a, b, 20)
	})
}

func mustEncode(t testing.TB, e ledger.Event) []byte {
	t.Helper()
	b, err := ledger.EncodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMsgIDPreempted: another user publishes first under the message id a
// commit's part will carry (within the stream's duplicate window the server
// drops whatever else carries it, answering "duplicate"). The commit is not
// believed stored: Append finds it nowhere, publishes again under ids with a
// random nonce, and returns the seqs where it really is — one message each,
// single and batched, whichever part's id was taken.
func TestMsgIDPreempted(t *testing.T) {
	t.Parallel()
	l, nc := newLedger(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, partitions := range [][]string{{"s"}, {"a", "b", "c"}} {
		for taken := 1; taken <= len(partitions); taken++ {
			name := fmt.Sprintf("%s part %d", strings.Join(partitions, ","), taken)
			parts := make([]part, len(partitions))
			for i, p := range partitions {
				parts[i] = next(t, l, p)
			}
			evs := mkCommit(t, l, parts...)
			// The attacker's own well-formed commit, under the victim's id.
			own := mkCommit(t, l, next(t, l, "x"))
			m := nats.NewMsg(ledger.Subject("test", "x"))
			m.Data = mustEncode(t, own[0])
			m.Header.Set(jetstream.MsgIDHeader, evs[0].Commit+"/"+strconv.Itoa(taken))
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			seqs, err := l.Append(ctx, evs)
			if err != nil {
				t.Fatalf("%s: Append after its id was taken: %v", name, err)
			}
			rs := readAll(t, l, 1, 0)
			var at []ledger.Seq
			for _, r := range rs {
				if r.Event.Commit == evs[0].Commit {
					at = append(at, r.Seq)
				}
			}
			if !cmp.Equal(at, seqs) {
				t.Fatalf("%s: Append = %v, the commit is at %v", name, seqs, at)
			}
			for _, p := range append(partitions, "x") {
				checkChain(t, readPartition(t, l, p, 1))
			}
		}
	}
}

package drivertest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// LogFixture is one fresh, empty ledger log's driver for a CommitLog
// conformance subtest: the suite runs on the portable ledger.Log over it
// (ledger.NewLog), as every CommitLog handed out is, with a counter between
// them that tells what the portable type refused before the driver was
// called.
type LogFixture struct {
	Driver ledger.LogDriver
	// Publish stores a raw message on subject, unchecked: what a credential
	// allowed to publish there could store. It returns the message's seq.
	Publish func(subject string, data []byte) (ledger.Seq, error)
	// MissNotices, when set, makes the log stop telling its followers of
	// the records it stores (on JetStream: the stream stops republishing
	// them, as when a republish is lost) until the function it returns is
	// called. A follower must deliver every record all the same, in order:
	// the notices are best effort. nil: the log has no notices a follower
	// could miss (memledger).
	MissNotices func(t *testing.T) (restore func())
	// ReaderState, when set, returns how many objects the log's server
	// holds for readers (on JetStream: the stream's consumers). Followers
	// must add none, and leave none behind. nil: the log has no server
	// (memledger).
	ReaderState func(ctx context.Context) (int, error)
}

// logEnv is one subtest's fixture, with the portable log over its driver
// and the driver's calls counted.
type logEnv struct {
	LogFixture
	Log   ledger.CommitLog
	calls *countingLog
}

// TestCommitLog runs the ledger.CommitLog conformance suite on the portable
// ledger.Log over a driver. newLog must return a new, empty ledger's driver
// on each call (once per subtest).
func TestCommitLog(t *testing.T, newLog func(t *testing.T) LogFixture) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, f logEnv)
	}{
		{"Empty", testLogEmpty},
		{"Chain", testLogChain},
		{"Head", testLogHead},
		{"AtomicCommit", testLogAtomic},
		{"RetryStoresOnce", testLogRetry},
		{"RefusesBadCommits", testLogRefuses},
		{"RefusedBeforeTheDriver", testLogRefusedBeforeDriver},
		{"ReadRanges", testLogReadRanges},
		{"ReadPartition", testLogReadPartition},
		{"Follow", testLogFollow},
		{"FollowSurvivesMissedNotices", testLogFollowMissed},
		{"FollowHoldsNoServerState", testLogFollowStateless},
		{"BadMessageAndQuarantine", testLogQuarantine},
		{"ChainPastQuarantined", testLogChainPastQuarantined},
		{"ChainThroughQuarantinedEvent", testLogChainThroughQuarantinedEvent},
		{"Truncate", testLogTruncate},
		{"Attest", testLogAttest},
		{"CommitAt", testLogCommitAt},
		{"Fenced", testLogFenced},
		{"LockLostOrConflict", testLogLockLostOrConflict},
		{"FencedRetry", testLogFencedRetry},
		{"FenceRefuses", testLogFenceRefuses},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLog(t)
			c := &countingLog{LogDriver: f.Driver}
			tc.fn(t, testContext(t), logEnv{LogFixture: f, Log: ledger.NewLog(c), calls: c})
		})
	}
}

// logPart describes one event of a commit under construction.
type logPart struct {
	partition string
	modelSeq  uint64
	prev      ledger.Seq
}

func logCommit(t *testing.T, ctx context.Context, l ledger.CommitLog, parts ...logPart) []ledger.Event {
	t.Helper()
	info, err := l.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	evs := make([]ledger.Event, len(parts))
	for i, p := range parts {
		path := fmt.Sprintf("%s/file-%d", p.partition, p.modelSeq)
		evs[i] = ledger.Event{
			V: ledger.FormatVersion, Ledger: info.UUID, Commit: id, Host: "host-a", At: at,
			Partition: p.partition, ModelSeq: p.modelSeq, Prev: p.prev, Parts: len(parts), Part: i + 1,
			Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: int64(len(path)), Mode: 0o644}},
		}
	}
	return evs
}

// logNext returns the part extending partition p's chain as the log has it.
func logNext(t *testing.T, ctx context.Context, l ledger.CommitLog, p string) logPart {
	t.Helper()
	r, err := l.PartitionHead(ctx, p)
	if errors.Is(err, ledger.ErrNotFound) {
		return logPart{partition: p, modelSeq: 1}
	}
	if err != nil {
		t.Fatalf("PartitionHead(%q): %v", p, err)
	}
	return logPart{partition: p, modelSeq: r.Event.ModelSeq + 1, prev: r.Seq}
}

// logAppend appends a commit extending each partition, and returns its seqs.
func logAppend(t *testing.T, ctx context.Context, l ledger.CommitLog, partitions ...string) []ledger.Seq {
	t.Helper()
	parts := make([]logPart, len(partitions))
	for i, p := range partitions {
		parts[i] = logNext(t, ctx, l, p)
	}
	seqs, err := l.Append(ctx, logCommit(t, ctx, l, parts...))
	if err != nil {
		t.Fatalf("Append(%v): %v", partitions, err)
	}
	return seqs
}

func logRead(t *testing.T, ctx context.Context, l ledger.CommitLog, from, to ledger.Seq) []ledger.Record {
	t.Helper()
	var rs []ledger.Record
	if err := l.Read(ctx, from, to, func(r ledger.Record) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatalf("Read(%d, %d): %v", from, to, err)
	}
	return rs
}

func logSeqs(rs []ledger.Record) []ledger.Seq {
	out := make([]ledger.Seq, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func wantSeqs(t *testing.T, what string, got []ledger.Seq, want ...ledger.Seq) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: seqs %v, want %v", what, got, want)
	}
}

func wantBounds(t *testing.T, ctx context.Context, l ledger.CommitLog, first, last ledger.Seq) {
	t.Helper()
	b, err := l.Bounds(ctx)
	if err != nil || b != (ledger.Bounds{First: first, Last: last}) {
		t.Fatalf("Bounds = %+v, %v; want {%d %d}", b, err, first, last)
	}
	if got, err := l.LastSeq(ctx); err != nil || got != last {
		t.Fatalf("LastSeq = %d, %v; want %d", got, err, last)
	}
}

func testLogEmpty(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	info, err := l.Info(ctx)
	if err != nil || info.UUID == "" || info.Format != ledger.LogFormat {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	wantBounds(t, ctx, l, 1, 0)
	if s, err := l.PartitionLastSeq(ctx, "p"); err != nil || s != 0 {
		t.Fatalf("PartitionLastSeq of an empty partition = %d, %v", s, err)
	}
	if _, err := l.PartitionHead(ctx, "p"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("PartitionHead of an empty partition = %v, want ErrNotFound", err)
	}
	if rs := logRead(t, ctx, l, 1, 0); len(rs) != 0 {
		t.Fatalf("Read of an empty log = %v", rs)
	}
	if qs, err := l.Quarantines(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Quarantines of an empty log = %v, %v", qs, err)
	}
}

// testLogHead: the head of an empty log, after commits, with and without
// the commit id, asked of the log's source and of the origin: a log without
// a mirror answers as the origin, at a time no earlier than the call. Its two
// uses by a host: the stamp, read with the seq, stays while the message at
// the head does and changes with the next message (a no-op sync asks nothing
// more); the commit id at the head is CommitAt's there, "" for a message that
// is no event (the check of a rewound log).
func testLogHead(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	before := time.Now().Add(-time.Second) // clocks of a server may differ a little
	reqs := []ledger.HeadRequest{{}, {Commit: true}, {Origin: true}, {Origin: true, Commit: true}}
	for _, req := range reqs {
		h, err := l.Head(ctx, req)
		if err != nil || h.Seq != 0 || h.Commit != "" || h.Stamp != "" || !h.FromOrigin() || h.AsOf.Before(before) {
			t.Fatalf("Head(%+v) of an empty log = %+v, %v; want seq 0, no stamp, from the origin, as of now", req, h, err)
		}
	}
	// head checks each request's answer at seq with commit (when asked
	// for), from the origin, all with one stamp; it returns that stamp.
	head := func(seq ledger.Seq, commit string) string {
		t.Helper()
		stamp := ""
		for _, req := range reqs {
			h, err := l.Head(ctx, req)
			want := ""
			if req.Commit {
				want = commit
			}
			if err != nil || h.Seq != seq || h.Commit != want || !h.FromOrigin() || h.Lag != 0 || h.Staleness(time.Now()) != 0 {
				t.Fatalf("Head(%+v) = %+v, %v; want seq %d, commit %q, from the origin", req, h, err, seq, want)
			}
			if h.Stamp == "" || (stamp != "" && h.Stamp != stamp) {
				t.Fatalf("Head(%+v) = %+v; want the stamp of the message at seq %d (%q from the first request)", req, h, seq, stamp)
			}
			stamp = h.Stamp
		}
		return stamp
	}
	logAppend(t, ctx, l, "a")
	seqs := logAppend(t, ctx, l, "a", "b")
	evs := logRead(t, ctx, l, seqs[1], seqs[1])
	s1 := head(seqs[1], evs[0].Event.Commit)
	if at, err := l.CommitAt(ctx, seqs[1]); err != nil || at != evs[0].Event.Commit {
		t.Fatalf("CommitAt(%d) = %q, %v; want the head's commit %q", seqs[1], at, err, evs[0].Event.Commit)
	}
	next := logAppend(t, ctx, l, "b")
	evs = logRead(t, ctx, l, next[0], next[0])
	if s2 := head(next[0], evs[0].Event.Commit); s2 == s1 {
		t.Fatalf("Head after an append has the stamp %q of the message before it; want another", s2)
	}
	// A message at the head that is no event of this ledger: a stamp, no commit.
	info, _ := l.Info(ctx)
	bad, err := f.Publish(ledger.Subject(info.Name, "c"), []byte(`{"not":"an event"}`))
	if err != nil {
		t.Fatal(err)
	}
	sBad := head(bad, "")
	// Retention drops events below the head, never the head: its seq, stamp
	// and commit stay (a no-op sync after a retention run asks nothing
	// more), and the head a retention bound is checked against is where
	// Bounds ends.
	if _, err := l.TruncateBefore(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if s := head(bad, ""); s != sBad {
		t.Fatalf("Head after a truncation below it has the stamp %q; want the same message's %q", s, sBad)
	}
	if b, err := l.Bounds(ctx); err != nil || b.Last != bad {
		t.Fatalf("Bounds = %+v, %v; want the last seq %d the head says", b, err, bad)
	}
}

func testLogChain(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	wantSeqs(t, "first commit", logAppend(t, ctx, l, "a"), 1)
	wantSeqs(t, "second partition", logAppend(t, ctx, l, "b"), 2)
	wantSeqs(t, "chain of a", logAppend(t, ctx, l, "a"), 3)
	// A writer that had not seen seq 3: its Prev is 1.
	stale := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 2, prev: 1})
	_, err := l.Append(ctx, stale)
	var ce *ledger.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ledger.ErrConflict) || ce.Partition != "a" || ce.Expected != 1 || ce.Actual != 3 {
		t.Fatalf("stale Append = %v, want a ConflictError on a, expected 1, actual 3", err)
	}
	// A new partition's first event must have Prev 0; a partition with events refuses Prev 0.
	if _, err := l.Append(ctx, logCommit(t, ctx, l, logPart{partition: "b", modelSeq: 1})); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("Append restarting b's chain at Prev 0 = %v, want ErrConflict", err)
	}
	wantBounds(t, ctx, l, 1, 3)
	if s, err := l.PartitionLastSeq(ctx, "a"); err != nil || s != 3 {
		t.Fatalf("PartitionLastSeq(a) = %d, %v; want 3", s, err)
	}
	h, err := l.PartitionHead(ctx, "a")
	if err != nil || h.Seq != 3 || h.Event.ModelSeq != 2 || h.Event.Prev != 1 {
		t.Fatalf("PartitionHead(a) = %+v, %v; want seq 3, modelSeq 2, prev 1", h, err)
	}
}

func testLogAtomic(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	logAppend(t, ctx, l, "b")
	// Part 2 conflicts (b's Prev is wrong): nothing of the commit is stored.
	bad := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1}, logPart{partition: "b", modelSeq: 1}, logPart{partition: "c", modelSeq: 1})
	if _, err := l.Append(ctx, bad); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("Append with one stale part = %v, want ErrConflict", err)
	}
	wantBounds(t, ctx, l, 1, 1)
	seqs := logAppend(t, ctx, l, "a", "b", "c")
	wantSeqs(t, "three-partition commit", seqs, 2, 3, 4)
	rs := logRead(t, ctx, l, 2, 0)
	for i, r := range rs {
		if r.Event.Part != i+1 || r.Event.Parts != 3 || !r.LastOfCommit() != (i < 2) {
			t.Fatalf("record %d: part %d/%d", r.Seq, r.Event.Part, r.Event.Parts)
		}
	}
}

func testLogRetry(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	evs := logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1}, logPart{partition: "b", modelSeq: 1})
	first, err := l.Append(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Append(ctx, evs)
	if err != nil {
		t.Fatalf("retried Append = %v, want the stored seqs", err)
	}
	wantSeqs(t, "retried Append", again, first...)
	wantBounds(t, ctx, l, 1, 2)
}

func testLogRefuses(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	good := func() []ledger.Event {
		return logCommit(t, ctx, l, logPart{partition: "a", modelSeq: 1}, logPart{partition: "b", modelSeq: 1})
	}
	cases := []struct {
		name string
		evs  func() []ledger.Event
		want error
	}{
		{"no events", func() []ledger.Event { return nil }, ledger.ErrInvalid},
		{"parts out of order", func() []ledger.Event { e := good(); e[0].Part, e[1].Part = 2, 1; return e }, ledger.ErrInvalid},
		{"two commit ids", func() []ledger.Event {
			e := good()
			e[1].Commit = logCommit(t, ctx, l, logPart{partition: "x", modelSeq: 1})[0].Commit
			return e
		}, ledger.ErrInvalid},
		{"partition twice", func() []ledger.Event { e := good(); e[1].Partition = "a"; return e }, ledger.ErrInvalid},
		{"another lineage", func() []ledger.Event {
			e := good()
			for i := range e {
				e[i].Ledger = "00000000-0000-4000-8000-000000000000"
			}
			return e
		}, ledger.ErrLineage},
	}
	for _, c := range cases {
		if _, err := l.Append(ctx, c.evs()); !errors.Is(err, c.want) {
			t.Errorf("Append(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	wantBounds(t, ctx, l, 1, 0)
}

func testLogReadRanges(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	for _, p := range []string{"a", "b", "a", "c", "b"} {
		logAppend(t, ctx, l, p)
	}
	wantSeqs(t, "Read(1, 0)", logSeqs(logRead(t, ctx, l, 1, 0)), 1, 2, 3, 4, 5)
	wantSeqs(t, "Read(0, 0)", logSeqs(logRead(t, ctx, l, 0, 0)), 1, 2, 3, 4, 5)
	wantSeqs(t, "Read(2, 4)", logSeqs(logRead(t, ctx, l, 2, 4)), 2, 3, 4)
	wantSeqs(t, "Read(4, 99)", logSeqs(logRead(t, ctx, l, 4, 99)), 4, 5)
	wantSeqs(t, "Read(6, 0)", logSeqs(logRead(t, ctx, l, 6, 0)))
	stop := errors.New("stop")
	n := 0
	err := l.Read(ctx, 1, 0, func(ledger.Record) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Read whose fn fails = %v after %d records, want fn's error after 1", err, n)
	}
}

func testLogReadPartition(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	for _, p := range []string{"a", "b", "a", "c", "a"} {
		logAppend(t, ctx, l, p)
	}
	var rs []ledger.Record
	if err := l.ReadPartition(ctx, "a", 2, func(r ledger.Record) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "ReadPartition(a, 2)", logSeqs(rs), 3, 5)
	if rs[0].Event.Prev != 1 || rs[1].Event.Prev != 3 {
		t.Fatalf("chain of a: prevs %d %d, want 1 3", rs[0].Event.Prev, rs[1].Event.Prev)
	}
	rs = nil
	if err := l.ReadPartition(ctx, "none", 1, func(r ledger.Record) error { rs = append(rs, r); return nil }); err != nil || len(rs) != 0 {
		t.Fatalf("ReadPartition of an empty partition = %v, %v", rs, err)
	}
}

func testLogFollow(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	logAppend(t, ctx, l, "a")
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan ledger.Seq, 8)
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(fctx, 1, func(r ledger.Record) error { got <- r.Seq; return nil })
	}()
	want := func(seq ledger.Seq) {
		t.Helper()
		select {
		case s := <-got:
			if s != seq {
				t.Fatalf("Follow delivered seq %d, want %d", s, seq)
			}
		case <-ctx.Done():
			t.Fatalf("Follow delivered nothing; want seq %d", seq)
		}
	}
	want(1)
	logAppend(t, ctx, l, "b", "c")
	want(2)
	want(3)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel = %v, want context.Canceled", err)
	}
}

// follower is a Follow running on its own goroutine.
type follower struct {
	got    chan ledger.Seq
	done   chan error
	cancel context.CancelFunc
}

func startFollow(ctx context.Context, l ledger.CommitLog, from ledger.Seq) *follower {
	fctx, cancel := context.WithCancel(ctx)
	f := &follower{got: make(chan ledger.Seq, 64), done: make(chan error, 1), cancel: cancel}
	go func() {
		f.done <- l.Follow(fctx, from, func(r ledger.Record) error { f.got <- r.Seq; return nil })
	}()
	return f
}

// want waits for the follower to deliver exactly seqs, in order.
func (f *follower) want(t *testing.T, ctx context.Context, seqs ...ledger.Seq) {
	t.Helper()
	for _, seq := range seqs {
		select {
		case s := <-f.got:
			if s != seq {
				t.Fatalf("Follow delivered seq %d, want %d", s, seq)
			}
		case err := <-f.done:
			t.Fatalf("Follow returned %v; want seq %d", err, seq)
		case <-ctx.Done():
			t.Fatalf("Follow delivered nothing; want seq %d", seq)
		}
	}
}

// stop cancels the follower and checks that it returns context.Canceled.
func (f *follower) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	if err := <-f.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel = %v, want context.Canceled", err)
	}
}

// testLogFollowMissed: a follower that was not told of some records — the
// log's notices are best effort — still delivers them, in order, then goes
// on with the next ones.
func testLogFollowMissed(t *testing.T, ctx context.Context, f logEnv) {
	if f.MissNotices == nil {
		t.Skip("the log has no notices a follower could miss")
	}
	l := f.Log
	logAppend(t, ctx, l, "a")
	fl := startFollow(ctx, l, 1)
	defer fl.cancel()
	fl.want(t, ctx, 1)
	restore := f.MissNotices(t)
	logAppend(t, ctx, l, "b")
	logAppend(t, ctx, l, "a", "c")
	fl.want(t, ctx, 2, 3, 4) // nothing newer reveals them: the follower's idle check
	logAppend(t, ctx, l, "d")
	fl.want(t, ctx, 5)
	restore()
	logAppend(t, ctx, l, "e")
	fl.want(t, ctx, 6)
	// Missed again, and revealed by the next record told of.
	restore = f.MissNotices(t)
	logAppend(t, ctx, l, "f")
	restore()
	logAppend(t, ctx, l, "g")
	fl.want(t, ctx, 7, 8)
	fl.stop(t)
}

// testLogFollowStateless: followers hold nothing on the log's server while
// they follow, and leave nothing behind when they stop — cancelled, or
// failing in fn.
func testLogFollowStateless(t *testing.T, ctx context.Context, f logEnv) {
	if f.ReaderState == nil {
		t.Skip("the log has no server")
	}
	l := f.Log
	count := func(when string) int {
		t.Helper()
		n, err := f.ReaderState(ctx)
		if err != nil {
			t.Fatalf("ReaderState %s: %v", when, err)
		}
		return n
	}
	before := count("before")
	logAppend(t, ctx, l, "a")
	var fls []*follower
	for range 3 {
		fl := startFollow(ctx, l, 1)
		defer fl.cancel()
		fl.want(t, ctx, 1)
		fls = append(fls, fl)
	}
	logAppend(t, ctx, l, "b")
	for _, fl := range fls {
		fl.want(t, ctx, 2)
	}
	if n := count("while following"); n != before {
		t.Fatalf("the server holds %d reader objects while 3 follow, %d before", n, before)
	}
	for _, fl := range fls {
		fl.stop(t)
	}
	stop := errors.New("stop")
	if err := l.Follow(ctx, 1, func(ledger.Record) error { return stop }); err != stop {
		t.Fatalf("Follow with a failing fn = %v", err)
	}
	if n := count("after"); n != before {
		t.Fatalf("the server holds %d reader objects after the followers stopped, %d before", n, before)
	}
}

func quarantine(seq ledger.Seq) ledger.Quarantine {
	return ledger.Quarantine{Seq: seq, Reason: "conformance", By: "admin", At: time.Now().UTC().Truncate(time.Second)}
}

func testLogQuarantine(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	info, _ := l.Info(ctx)
	logAppend(t, ctx, l, "a")
	bad, err := f.Publish(ledger.Subject(info.Name, "b"), []byte(`{"not":"an event"}`))
	if err != nil || bad != 2 {
		t.Fatalf("raw publish = seq %d, %v; want seq 2", bad, err)
	}
	logAppend(t, ctx, l, "a")
	// Every reader stops at the bad message.
	var re *ledger.RecordError
	err = l.Read(ctx, 1, 0, func(ledger.Record) error { return nil })
	if !errors.As(err, &re) || re.Seq != 2 || !errors.Is(err, ledger.ErrInvalid) || re.Decoded {
		t.Fatalf("Read over a bad message = %v, want a RecordError at seq 2 wrapping ErrInvalid", err)
	}
	// A well-formed event is quarantined only with force.
	if _, err := l.Quarantine(ctx, quarantine(1), false); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Quarantine of a well-formed event without force = %v, want ErrInvalid", err)
	}
	if _, err := l.Quarantine(ctx, quarantine(9), false); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Quarantine of a seq the log does not hold = %v, want ErrInvalid", err)
	}
	notice, err := l.Quarantine(ctx, quarantine(bad), false)
	if err != nil || notice != 4 {
		t.Fatalf("Quarantine(2) = %d, %v; want the notice at seq 4", notice, err)
	}
	if _, err := l.Quarantine(ctx, quarantine(bad), false); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("second Quarantine(2) = %v, want ErrConflict", err)
	}
	if _, err := l.Quarantine(ctx, quarantine(notice), true); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Quarantine of a notice = %v, want ErrInvalid", err)
	}
	qs, err := l.Quarantines(ctx)
	if _, ok := qs[bad]; err != nil || len(qs) != 1 || !ok {
		t.Fatalf("Quarantines = %v, %v; want seq 2", qs, err)
	}
	rs := logRead(t, ctx, l, 1, 0)
	wantSeqs(t, "Read after quarantine", logSeqs(rs), 1, 2, 3, 4)
	if rs[1].Skip == nil || rs[1].Skip.Notice || rs[1].Skip.Partition != "b" || rs[1].Skip.Quarantine.Seq != bad {
		t.Fatalf("record 2 = %+v, want a skipped message of partition b", rs[1])
	}
	if rs[3].Skip == nil || !rs[3].Skip.Notice || rs[3].Skip.Quarantine.Seq != bad {
		t.Fatalf("record 4 = %+v, want the notice", rs[3])
	}
	if rs[0].Skip != nil || rs[2].Skip != nil {
		t.Fatalf("events skipped: %+v %+v", rs[0], rs[2])
	}
	if _, err := l.PartitionHead(ctx, "b"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("PartitionHead of a partition holding only a quarantined message = %v, want ErrNotFound", err)
	}
}

func testLogChainPastQuarantined(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	info, _ := l.Info(ctx)
	logAppend(t, ctx, l, "a")
	bad, err := f.Publish(ledger.Subject(info.Name, "a"), []byte("garbage"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Quarantine(ctx, quarantine(bad), false); err != nil {
		t.Fatal(err)
	}
	// The quarantined message is part of no chain: a's next event names seq 1.
	n := logNext(t, ctx, l, "a")
	if n.prev != 1 || n.modelSeq != 2 {
		t.Fatalf("a's head after a quarantined message: prev %d modelSeq %d, want 1 and 2", n.prev, n.modelSeq)
	}
	seqs, err := l.Append(ctx, logCommit(t, ctx, l, n))
	if err != nil {
		t.Fatalf("Append past a quarantined message = %v", err)
	}
	var rs []ledger.Record
	if err := l.ReadPartition(ctx, "a", 1, func(r ledger.Record) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "ReadPartition(a) past a quarantined message", logSeqs(rs), 1, seqs[0])
}

// A well-formed event quarantined (with force) after a later event of its
// partition named it as its prev stays a link every reader knows is skipped
// (issue 26 point 5): the notice records it, the later event carries a Bridge
// to the event before it, and ReadPartition reads past it.
func testLogChainThroughQuarantinedEvent(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	logAppend(t, ctx, l, "a") // seq 1
	logAppend(t, ctx, l, "a") // seq 2: quarantined below
	logAppend(t, ctx, l, "a") // seq 3: prev 2
	if _, err := l.Quarantine(ctx, quarantine(2), true); err != nil {
		t.Fatal(err)
	}
	qs, err := l.Quarantines(ctx)
	if q := qs[2]; err != nil || q.Partition != "a" || q.ModelSeq != 2 || q.Prev != 1 {
		t.Fatalf("the notice of seq 2 = %+v, %v; want its link: partition a, modelSeq 2, prev 1", q, err)
	}
	rs := logRead(t, ctx, l, 1, 3)
	if b := rs[2].Bridge; b == nil || b.Prev != 1 || b.ModelSeq != 1 {
		t.Fatalf("seq 3's bridge = %+v, want modelSeq 1 at seq 1", b)
	}
	for _, from := range []ledger.Seq{1, 2} {
		var got []ledger.Record
		if err := l.ReadPartition(ctx, "a", from, func(r ledger.Record) error { got = append(got, r); return nil }); err != nil {
			t.Fatalf("ReadPartition(a, %d) through a quarantined event = %v", from, err)
		}
		want := []ledger.Seq{1, 3}
		if from == 2 {
			want = want[1:]
		}
		wantSeqs(t, fmt.Sprintf("ReadPartition(a, %d)", from), logSeqs(got), want...)
	}
}

func testLogTruncate(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	for _, p := range []string{"a", "b", "a", "c", "a", "b"} { // seqs 1..6
		logAppend(t, ctx, l, p)
	}
	dropped, err := l.TruncateBefore(ctx, 5)
	if err != nil || dropped != 3 {
		t.Fatalf("TruncateBefore(5) = %d, %v; want 3 (a@1, b@2, a@3; c@4 is c's head)", dropped, err)
	}
	if again, err := l.TruncateBefore(ctx, 5); err != nil || again != 0 {
		t.Fatalf("TruncateBefore(5) again = %d, %v; want 0", again, err)
	}
	wantBounds(t, ctx, l, 4, 6)
	err = l.Read(ctx, 1, 0, func(ledger.Record) error { return nil })
	var te *ledger.TruncatedError
	if !errors.Is(err, ledger.ErrTruncated) || !errors.As(err, &te) || te.First != 4 {
		t.Fatalf("Read from 1 after truncation = %v, want a TruncatedError with first 4", err)
	}
	wantSeqs(t, "Read(4, 0)", logSeqs(logRead(t, ctx, l, 4, 0)), 4, 5, 6)
	for _, p := range []string{"a", "b", "c"} {
		logAppend(t, ctx, l, p) // each chain goes on from its kept head
	}
	wantBounds(t, ctx, l, 4, 9)
}

// testLogCommitAt: CommitAt names the commit of each event stored, its
// quarantined ones included; "" for a notice or a message that is no event;
// ErrNotFound past the last seq and for a dropped one.
func testLogCommitAt(t *testing.T, ctx context.Context, f logEnv) {
	l := f.Log
	info, _ := l.Info(ctx)
	ab := logCommit(t, ctx, l, logNext(t, ctx, l, "a"), logNext(t, ctx, l, "b"))
	if _, err := l.Append(ctx, ab); err != nil { // seqs 1, 2
		t.Fatal(err)
	}
	bad, err := f.Publish(ledger.Subject(info.Name, "c"), []byte(`{"not":"an event"}`)) // seq 3
	if err != nil {
		t.Fatal(err)
	}
	logAppend(t, ctx, l, "a")                                         // seq 4
	if _, err := l.Quarantine(ctx, quarantine(4), true); err != nil { // notice at seq 5
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seq  ledger.Seq
		want string
	}{{1, ab[0].Commit}, {2, ab[0].Commit}, {bad, ""}, {5, ""}} {
		if got, err := l.CommitAt(ctx, tc.seq); err != nil || got != tc.want {
			t.Errorf("CommitAt(%d) = %q, %v; want %q", tc.seq, got, err, tc.want)
		}
	}
	if got, err := l.CommitAt(ctx, 4); err != nil || got == "" || got == ab[0].Commit {
		t.Errorf("CommitAt(4), a quarantined event = %q, %v; want its own commit id", got, err)
	}
	if _, err := l.CommitAt(ctx, 6); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("CommitAt past the last seq = %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		p    string
		seq  ledger.Seq
		want string
	}{{"b", 2, ab[0].Commit}, {"c", bad, ""}, {"none", 0, ""}} {
		if seq, got, err := l.PartitionTip(ctx, tc.p); err != nil || seq != tc.seq || got != tc.want {
			t.Errorf("PartitionTip(%s) = %d, %q, %v; want %d, %q", tc.p, seq, got, err, tc.seq, tc.want)
		}
	}
	for _, p := range []string{"a", "b"} {
		logAppend(t, ctx, l, p) // seqs 6, 7: the heads of a and b
	}
	if _, err := l.TruncateBefore(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CommitAt(ctx, 1); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("CommitAt of a dropped seq = %v, want ErrNotFound", err)
	}
}

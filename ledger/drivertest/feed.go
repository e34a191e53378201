package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// FeedFixture is one fresh, empty ledger's log and its feed's driver for a
// Feed conformance subtest: the suite runs on the portable ledger feed over
// the driver (ledger.NewFeed), as every Feed handed out is, with a counter
// between them that tells what the portable type refused before the driver
// was called.
type FeedFixture struct {
	Log    ledger.CommitLog
	Driver ledger.FeedDriver
	// Crashable returns the ledger's feed as another process would open it
	// (its own connection) and a crash that ends that process's open
	// subscriptions, losing what they did not acknowledge.
	Crashable func(t *testing.T) (ledger.Feed, func())
}

// feedEnv is one subtest's fixture, with the portable feed over its driver
// and the driver's calls counted.
type feedEnv struct {
	FeedFixture
	Feed  ledger.Feed
	calls *countingFeed
}

// TestFeed runs the ledger.Feed conformance suite on the portable feed over
// a driver. newFeed must return a new, empty ledger's log and feed driver on
// each call (once per subtest).
func TestFeed(t *testing.T, newFeed func(t *testing.T) FeedFixture) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, f feedEnv)
	}{
		{"DeliversInOrder", testFeedOrder},
		{"ResumesAtAckFloor", testFeedResume},
		{"CrashRedeliversHeldFirst", testFeedCrash},
		{"AckWaitRedelivers", testFeedAckWait},
		{"Filter", testFeedFilter},
		{"QuarantineNotices", testFeedNotices},
		{"Start", testFeedStart},
		{"Truncated", testFeedTruncated},
		{"DeadLetters", testFeedDeadLetters},
		{"Delete", testFeedDelete},
		{"RefusesBadConsumers", testFeedRefuses},
		{"RefusedBeforeTheDriver", testFeedRefusedBeforeDriver},
		{"Create", testFeedCreate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			f := newFeed(t)
			info, err := f.Log.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c := &countingFeed{FeedDriver: f.Driver}
			tc.fn(t, ctx, feedEnv{FeedFixture: f, Feed: ledger.NewFeed(info.Name, c), calls: c})
		})
	}
}

func feedConsumer(name string, partitions ...string) ledger.FeedConsumer {
	return ledger.FeedConsumer{Name: name, Partitions: partitions, AckWait: time.Minute}
}

func subscribe(t *testing.T, ctx context.Context, f ledger.Feed, c ledger.FeedConsumer) ledger.Subscription {
	t.Helper()
	s, err := f.Subscribe(ctx, c)
	if err != nil {
		t.Fatalf("Subscribe(%+v): %v", c, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// next returns the next n messages' seqs.
func next(t *testing.T, ctx context.Context, s ledger.Subscription, n int) []ledger.Seq {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var seqs []ledger.Seq
	for range n {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %v: %v", seqs, err)
		}
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

// wantNothing checks that s delivers nothing within a short while.
func wantNothing(t *testing.T, ctx context.Context, s ledger.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if m, err := s.Next(ctx); err == nil {
		t.Fatalf("Next = seq %d, want nothing", m.Seq)
	}
}

func position(t *testing.T, ctx context.Context, f ledger.Feed, name string) ledger.FeedPosition {
	t.Helper()
	ps, err := f.Positions(ctx)
	if err != nil {
		t.Fatalf("Positions: %v", err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("Positions = %+v: no consumer %q", ps, name)
	return ledger.FeedPosition{}
}

func ack(t *testing.T, s ledger.Subscription, seq ledger.Seq) {
	t.Helper()
	if err := s.Ack(seq); err != nil {
		t.Fatalf("Ack(%d): %v", seq, err)
	}
}

// waitAckFloor waits until the feed has the acknowledgement of seq (a
// server's acknowledgements are asynchronous).
func waitAckFloor(t *testing.T, ctx context.Context, f ledger.Feed, name string, seq ledger.Seq) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); position(t, ctx, f, name).AckFloor < seq; {
		if time.Now().After(deadline) {
			t.Fatalf("ack floor of %s stays below %d", name, seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every message of the log, in seq order, as stored; an acknowledged one is
// not delivered again.
func testFeedOrder(t *testing.T, ctx context.Context, f feedEnv) {
	c1 := logAppend(t, ctx, f.Log, "a")
	c2 := logAppend(t, ctx, f.Log, "a", "b")
	s := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	info, err := f.Log.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rd := &ledger.MessageReader{Name: info.Name, UUID: info.UUID}
	for i, want := range append(c1, c2...) {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		r, err := rd.Record(m.Seq, m.Subject, m.Data)
		if err != nil || m.Seq != want || r.Event.Part != []int{1, 1, 2}[i] {
			t.Fatalf("message %d: seq %d, record %+v, %v; want seq %d", i, m.Seq, r, err, want)
		}
	}
	ack(t, s, c2[1])
	waitAckFloor(t, ctx, f.Feed, "c", c2[1])
	c3 := logAppend(t, ctx, f.Log, "b")
	wantSeqs(t, "after the ack", next(t, ctx, s, 1), c3...)
	p := position(t, ctx, f.Feed, "c")
	if p.Start != "all" || p.Partitions != nil || p.Head != c3[0] || p.Delivered != c3[0] || p.Pending != 0 {
		t.Errorf("position = %+v, want start all, no filter, head and delivered %d, none pending", p, c3[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
}

// A new subscription starts at the first message not acknowledged.
func testFeedResume(t *testing.T, ctx context.Context, f feedEnv) {
	var all []ledger.Seq
	for range 5 {
		all = append(all, logAppend(t, ctx, f.Log, "a")...)
	}
	s := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	wantSeqs(t, "first subscription", next(t, ctx, s, 5), all...)
	ack(t, s, all[1])
	waitAckFloor(t, ctx, f.Feed, "c", all[1])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	wantSeqs(t, "second subscription", next(t, ctx, s2, 3), all[2:]...)
	if p := position(t, ctx, f.Feed, "c"); p.AckFloor != all[1] || p.AckPending != 3 {
		t.Errorf("position = %+v, want ack floor %d, 3 awaiting their ack", p, all[1])
	}
}

// A crashed subscription's unacknowledged messages come first to the next.
func testFeedCrash(t *testing.T, ctx context.Context, f feedEnv) {
	var all []ledger.Seq
	for range 6 {
		all = append(all, logAppend(t, ctx, f.Log, "a")...)
	}
	other, crash := f.Crashable(t)
	s := subscribe(t, ctx, other, feedConsumer("c"))
	wantSeqs(t, "before the crash", next(t, ctx, s, 4), all[:4]...)
	ack(t, s, all[0])
	waitAckFloor(t, ctx, f.Feed, "c", all[0])
	crash()
	s2 := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	wantSeqs(t, "after the crash", next(t, ctx, s2, 5), all[1:]...)
}

// A message left unacknowledged past the ack wait is delivered again;
// InProgress keeps it.
func testFeedAckWait(t *testing.T, ctx context.Context, f feedEnv) {
	seqs := logAppend(t, ctx, f.Log, "a")
	c := feedConsumer("c")
	c.AckWait = 200 * time.Millisecond
	s := subscribe(t, ctx, f.Feed, c)
	wantSeqs(t, "first delivery", next(t, ctx, s, 1), seqs...)
	wantSeqs(t, "after the ack wait", next(t, ctx, s, 1), seqs...)
	if p := position(t, ctx, f.Feed, "c"); p.Redelivered != 1 || p.AckPending != 1 {
		t.Errorf("position = %+v, want 1 redelivered awaiting its ack", p)
	}
	ack(t, s, seqs[0])
	wantNothing(t, ctx, s)
}

// A filtered consumer gets its partitions' messages only, and its filter is
// fixed.
func testFeedFilter(t *testing.T, ctx context.Context, f feedEnv) {
	logAppend(t, ctx, f.Log, "a")
	c2 := logAppend(t, ctx, f.Log, "a", "b", "c")
	logAppend(t, ctx, f.Log, "a")
	c4 := logAppend(t, ctx, f.Log, "c")
	s := subscribe(t, ctx, f.Feed, feedConsumer("f", "b", "c"))
	wantSeqs(t, "filtered", next(t, ctx, s, 3), c2[1], c2[2], c4[0])
	p := position(t, ctx, f.Feed, "f")
	if !slices.Equal(p.Partitions, []string{"b", "c"}) {
		t.Errorf("position partitions = %q, want [b c]", p.Partitions)
	}
	if _, err := f.Feed.Subscribe(ctx, feedConsumer("f", "a")); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Subscribe with another filter = %v, want ErrInvalid", err)
	}
	if _, err := f.Feed.Subscribe(ctx, feedConsumer("f")); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Subscribe without the filter = %v, want ErrInvalid", err)
	}
}

// An unfiltered consumer receives every message, quarantine notices
// included; a filtered one its partitions' messages, quarantined ones too
// (readers skip them by the notices), and no notice.
func testFeedNotices(t *testing.T, ctx context.Context, f feedEnv) {
	c1 := logAppend(t, ctx, f.Log, "a")
	logAppend(t, ctx, f.Log, "b")
	notice, err := f.Log.Quarantine(ctx, quarantine(c1[0]), true)
	if err != nil {
		t.Fatalf("Quarantine: %v", err)
	}
	info, err := f.Log.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := subscribe(t, ctx, f.Feed, feedConsumer("all"))
	var subjects []string
	for range 3 {
		m, err := all.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, m.Subject)
	}
	want := []string{ledger.Subject(info.Name, "a"), ledger.Subject(info.Name, "b"), ledger.QuarantineSubject(info.Name)}
	if !slices.Equal(subjects, want) {
		t.Errorf("unfiltered: subjects %q, want %q (notice at seq %d)", subjects, want, notice)
	}
	filtered := subscribe(t, ctx, f.Feed, feedConsumer("a", "a"))
	wantSeqs(t, "filtered", next(t, ctx, filtered, 1), c1[0])
	wantNothing(t, ctx, filtered)
}

// A new consumer starts where Start says; an existing one keeps its place.
func testFeedStart(t *testing.T, ctx context.Context, f feedEnv) {
	c1 := logAppend(t, ctx, f.Log, "a")
	c2 := logAppend(t, ctx, f.Log, "a")
	subs := map[string]ledger.Subscription{}
	for name, start := range map[string]ledger.FeedStart{"all": {}, "new": {New: true}, "at": {Seq: c2[0]}} {
		c := feedConsumer(name)
		c.Start = start
		subs[name] = subscribe(t, ctx, f.Feed, c)
		if p := position(t, ctx, f.Feed, name); p.Start != start.String() {
			t.Errorf("%s: position start %q, want %q", name, p.Start, start)
		}
	}
	c3 := logAppend(t, ctx, f.Log, "b")
	wantSeqs(t, "start all", next(t, ctx, subs["all"], 3), c1[0], c2[0], c3[0])
	wantSeqs(t, "start at", next(t, ctx, subs["at"], 2), c2[0], c3[0])
	wantSeqs(t, "start new", next(t, ctx, subs["new"], 1), c3...)
	// Another Start for an existing consumer changes nothing.
	ack(t, subs["all"], c3[0])
	waitAckFloor(t, ctx, f.Feed, "all", c3[0])
	if err := subs["all"].Close(); err != nil {
		t.Fatal(err)
	}
	again := feedConsumer("all")
	again.Start = ledger.FeedStart{Seq: c1[0]}
	s := subscribe(t, ctx, f.Feed, again)
	c4 := logAppend(t, ctx, f.Log, "b")
	wantSeqs(t, "restarted", next(t, ctx, s, 1), c4...)
}

// Truncation moves a consumer's position past what it dropped (as a
// JetStream purge moves a consumer's ack floor): the next subscription starts
// at the first message the log holds. A new consumer cannot start at a seq the
// log no longer holds.
func testFeedTruncated(t *testing.T, ctx context.Context, f feedEnv) {
	var all []ledger.Seq
	for range 4 {
		all = append(all, logAppend(t, ctx, f.Log, "a")...)
	}
	s := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	next(t, ctx, s, 1)
	ack(t, s, all[0])
	waitAckFloor(t, ctx, f.Feed, "c", all[0])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Log.TruncateBefore(ctx, all[3]); err != nil {
		t.Fatal(err)
	}
	s2 := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	wantSeqs(t, "after the truncation", next(t, ctx, s2, 1), all[3])
	if p := position(t, ctx, f.Feed, "c"); p.AckFloor != all[2] {
		t.Errorf("ack floor after the truncation = %d, want %d", p.AckFloor, all[2])
	}
	var te *ledger.TruncatedError
	at := feedConsumer("at")
	at.Start = ledger.FeedStart{Seq: all[1]}
	if _, err := f.Feed.Subscribe(ctx, at); !errors.As(err, &te) || te.From != all[1] {
		t.Errorf("Subscribe of a new consumer at a truncated seq = %v, want a TruncatedError from %d", err, all[1])
	}
	s3 := subscribe(t, ctx, f.Feed, feedConsumer("all")) // a new consumer of all: from the first held
	wantSeqs(t, "new consumer after the truncation", next(t, ctx, s3, 1), all[3])
}

// Dead letters are kept once per consumer and seq, oldest first, counted in
// the positions, and outlive their consumer.
func testFeedDeadLetters(t *testing.T, ctx context.Context, f feedEnv) {
	logAppend(t, ctx, f.Log, "a")
	subscribe(t, ctx, f.Feed, feedConsumer("c1"))
	for _, d := range []struct {
		consumer string
		seq      ledger.Seq
		body     string
	}{{"c1", 1, "one"}, {"c2", 1, "two"}, {"c1", 1, "one again"}, {"c1", 2, "three"}} {
		if err := f.Feed.DeadLetter(ctx, d.consumer, d.seq, []byte(d.body)); err != nil {
			t.Fatalf("DeadLetter(%s, %d): %v", d.consumer, d.seq, err)
		}
	}
	read := func(consumer string) []string {
		var out []string
		var last ledger.Seq
		err := f.Feed.DeadLetters(ctx, consumer, func(d ledger.StoredDeadLetter) error {
			if d.Stored <= last || d.Received.IsZero() {
				t.Errorf("dead letter %+v: want a stored seq after %d and a time", d, last)
			}
			last = d.Stored
			out = append(out, d.Consumer+":"+string(d.Body))
			return nil
		})
		if err != nil {
			t.Fatalf("DeadLetters(%q): %v", consumer, err)
		}
		return out
	}
	if got, want := read("c1"), []string{"c1:one", "c1:three"}; !slices.Equal(got, want) {
		t.Errorf("DeadLetters(c1) = %q, want %q", got, want)
	}
	if got, want := read(""), []string{"c1:one", "c2:two", "c1:three"}; !slices.Equal(got, want) {
		t.Errorf("DeadLetters() = %q, want %q", got, want)
	}
	if got := read("none"); got != nil {
		t.Errorf("DeadLetters(none) = %q, want none", got)
	}
	if p := position(t, ctx, f.Feed, "c1"); p.DeadLetters != 2 {
		t.Errorf("position dead letters = %d, want 2", p.DeadLetters)
	}
	stop := errors.New("stop")
	if err := f.Feed.DeadLetters(ctx, "", func(ledger.StoredDeadLetter) error { return stop }); err != stop {
		t.Errorf("DeadLetters with fn failing = %v, want fn's error", err)
	}
}

// Delete removes a consumer's position; its dead letters stay.
func testFeedDelete(t *testing.T, ctx context.Context, f feedEnv) {
	seqs := logAppend(t, ctx, f.Log, "a")
	s := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	next(t, ctx, s, 1)
	ack(t, s, seqs[0])
	waitAckFloor(t, ctx, f.Feed, "c", seqs[0])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Feed.DeadLetter(ctx, "c", seqs[0], []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Feed.Delete(ctx, "c"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ps, err := f.Feed.Positions(ctx); err != nil || len(ps) != 0 {
		t.Errorf("Positions after Delete = %+v, %v; want none", ps, err)
	}
	if err := f.Feed.Delete(ctx, "c"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Delete again = %v, want ErrNotFound", err)
	}
	n := 0
	if err := f.Feed.DeadLetters(ctx, "c", func(ledger.StoredDeadLetter) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("dead letters after Delete: %d, %v; want the one", n, err)
	}
	// Made again, it starts afresh.
	s2 := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	wantSeqs(t, "made again", next(t, ctx, s2, 1), seqs...)
}

func testFeedRefuses(t *testing.T, ctx context.Context, f feedEnv) {
	for _, c := range []ledger.FeedConsumer{
		{Name: "bad.name", AckWait: time.Second},
		{Name: "", AckWait: time.Second},
		{Name: "c"},
		{Name: "c", AckWait: time.Second, Partitions: []string{"b", "a"}},
		{Name: "c", AckWait: time.Second, Partitions: []string{""}},
	} {
		if _, err := f.Feed.Subscribe(ctx, c); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Subscribe(%+v) = %v, want ErrInvalid", c, err)
		}
	}
	if err := f.Feed.DeadLetter(ctx, "bad.name", 1, nil); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("DeadLetter of a bad name = %v, want ErrInvalid", err)
	}
}

// Create makes a consumer (its start fixed then) that a Subscribe later
// opens; made again with its filter it is left as it is, with another it is
// refused.
func testFeedCreate(t *testing.T, ctx context.Context, f feedEnv) {
	logAppend(t, ctx, f.Log, "a") // before the consumer: not delivered
	c := feedConsumer("c")
	c.Start = ledger.FeedStart{New: true}
	if err := f.Feed.Create(ctx, c); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := f.Feed.Create(ctx, c); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	if err := f.Feed.Create(ctx, feedConsumer("c", "a")); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Create with another filter = %v, want ErrInvalid", err)
	}
	if p := position(t, ctx, f.Feed, "c"); p.Name != "c" {
		t.Errorf("position after Create = %+v", p)
	}
	later := logAppend(t, ctx, f.Log, "a")
	s := subscribe(t, ctx, f.Feed, feedConsumer("c"))
	wantSeqs(t, "a consumer made new before "+fmt.Sprint(later), next(t, ctx, s, len(later)), later...)
}

package consumers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/ledger"
)

// recorder is a handler that records the commits it handled, and fails as fail
// says.
type recorder struct {
	mu      sync.Mutex
	commits []consumers.Commit
	calls   map[ledger.Seq]int
	fail    func(c consumers.Commit, call int) error
}

func (h *recorder) Handle(_ context.Context, c consumers.Commit) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[ledger.Seq]int{}
	}
	h.calls[c.Seq]++
	if h.fail != nil {
		if err := h.fail(c, h.calls[c.Seq]); err != nil {
			return err
		}
	}
	h.commits = append(h.commits, c)
	return nil
}

func (h *recorder) seqs() []ledger.Seq {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ledger.Seq
	for _, c := range h.commits {
		out = append(out, c.Seq)
	}
	return out
}

func (h *recorder) callsOf(s ledger.Seq) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[s]
}

// run starts a Runner in the background and returns a function that stops it
// and returns Run's error.
func run(t *testing.T, l *consumertest.Ledger, cfg consumers.Config) (*consumers.Runner, func() error) {
	t.Helper()
	if cfg.Feed == nil {
		cfg.Feed = l.Feed
	}
	if cfg.Log == nil {
		cfg.Log = l.Log
	}
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.BackOff == nil {
		cfg.BackOff = []time.Duration{10 * time.Millisecond}
	}
	r, err := consumers.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(consumertest.Ctx(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

func waitHandled(t *testing.T, r *consumers.Runner, seq ledger.Seq) {
	t.Helper()
	consumertest.Wait(t, 20*time.Second, fmt.Sprintf("seq %d handled", seq), func() bool { return r.Stats().Seq >= seq })
}

func commitSeqs(seqs ...[]ledger.Seq) []ledger.Seq {
	var out []ledger.Seq
	for _, s := range seqs {
		out = append(out, s[len(s)-1])
	}
	return out
}

func TestFailTwiceThenSucceedIsProcessedOnce(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	c1, c2, c3 := l.Commit(t, "a"), l.Commit(t, "a", "b"), l.Commit(t, "b")
	h := &recorder{fail: func(c consumers.Commit, call int) error {
		if c.Seq == c2[1] && call <= 2 {
			return fmt.Errorf("flaky %d", call)
		}
		return nil
	}}
	r, stop := run(t, l, consumers.Config{Handler: h})
	waitHandled(t, r, c3[0])
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(commitSeqs(c1, c2, c3), h.seqs()); diff != "" {
		t.Errorf("handled commits (-want +got):\n%s", diff)
	}
	if got := h.callsOf(c2[1]); got != 3 {
		t.Errorf("calls for the flaky commit = %d, want 3", got)
	}
	st := r.Stats()
	if st.Handled != 3 || st.Retries != 2 || st.DeadLetters != 0 {
		t.Errorf("stats = %+v, want 3 handled, 2 retries, 0 dead letters", st)
	}
	ps, err := consumers.Positions(consumertest.Ctx(t), l.Feed)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].AckFloor != c3[0] || ps[0].Lag != 0 || ps[0].DeadLetters != 0 {
		t.Errorf("positions = %+v, want ack floor %d, no lag, no dead letters", ps, c3[0])
	}
}

func TestAlwaysFailingGoesToDeadLetterAndConsumerMovesOn(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	c1, c2, c3 := l.Commit(t, "a"), l.Commit(t, "a", "b", "c"), l.Commit(t, "c")
	h := &recorder{fail: func(c consumers.Commit, call int) error {
		if c.Seq == c2[2] {
			return errors.New("poison")
		}
		return nil
	}}
	r, stop := run(t, l, consumers.Config{Handler: h, MaxDeliver: 3})
	waitHandled(t, r, c3[0])
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(commitSeqs(c1, c3), h.seqs()); diff != "" {
		t.Errorf("handled commits (-want +got):\n%s", diff)
	}
	if got := h.callsOf(c2[2]); got != 3 {
		t.Errorf("calls for the poison commit = %d, want MaxDeliver = 3", got)
	}

	var read []consumers.DeadLetter
	err := consumers.ReadDeadLetters(consumertest.Ctx(t), l.Feed, "test", func(d consumers.DeadLetter) error {
		read = append(read, d)
		return nil
	})
	if err != nil || len(read) != 1 || read[0].Seq != c2[2] {
		t.Fatalf("ReadDeadLetters = %+v, %v; want the one dead letter", read, err)
	}
	dl := read[0]
	if dl.Seq != c2[2] || dl.Attempts != 3 || dl.Error != "poison" || len(dl.Events) != 3 || dl.Consumer != "test" {
		t.Errorf("dead letter = %+v", dl)
	}
	for i, e := range dl.Events {
		ev, err := ledger.DecodeEvent(e.Event)
		if err != nil || e.Seq != c2[i] || ev.Part != i+1 {
			t.Errorf("dead letter event %d: seq %d, part %d, err %v; want seq %d", i, e.Seq, ev.Part, err, c2[i])
		}
	}
	if all, err := json.Marshal(dl); err != nil || dl.Stored == 0 || dl.Received.IsZero() {
		t.Errorf("dead letter as stored: %s, %v; want its stored seq and time", all, err)
	}
	ps, err := consumers.Positions(consumertest.Ctx(t), l.Feed)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].DeadLetters != 1 || ps[0].AckFloor != c3[0] {
		t.Errorf("positions = %+v, want 1 dead letter, ack floor %d", ps, c3[0])
	}

	// Restarting does not offer the dead-lettered commit again.
	h2 := &recorder{}
	r2, stop2 := run(t, l, consumers.Config{Handler: h2})
	c4 := l.Commit(t, "a")
	waitHandled(t, r2, c4[0])
	_ = stop2()
	if diff := cmp.Diff(commitSeqs(c4), h2.seqs()); diff != "" {
		t.Errorf("after restart (-want +got):\n%s", diff)
	}
}

func TestPermanentErrorSkipsRetries(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	c1, c2 := l.Commit(t, "a"), l.Commit(t, "a")
	h := &recorder{fail: func(c consumers.Commit, call int) error {
		if c.Seq == c1[0] {
			return consumers.Permanent(errors.New("400 bad request"))
		}
		return nil
	}}
	r, stop := run(t, l, consumers.Config{Handler: h, MaxDeliver: 5})
	waitHandled(t, r, c2[0])
	_ = stop()
	if got := h.callsOf(c1[0]); got != 1 {
		t.Errorf("calls = %d, want 1 (permanent)", got)
	}
	if st := r.Stats(); st.DeadLetters != 1 || st.Retries != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestMultiPartCommitsArriveWhole(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	c1 := l.Commit(t, "a", "b", "c")
	c2 := l.Commit(t, "c")
	h := &recorder{}
	r, stop := run(t, l, consumers.Config{Handler: h})
	waitHandled(t, r, c2[0])
	_ = stop()
	if len(h.commits) != 2 {
		t.Fatalf("got %d commits, want 2", len(h.commits))
	}
	c := h.commits[0]
	if !c.Complete() || c.Seq != c1[2] || !slices.Equal(c.Partitions(), []string{"a", "b", "c"}) {
		t.Errorf("commit = seq %d, partitions %v, complete %v", c.Seq, c.Partitions(), c.Complete())
	}
}

// A lock's fence records and a fenced commit's checks (ledger.Fence) are no
// commits: the handler gets the commits alone, whole, and the consumer's
// position passes the fence messages, for a consumer of every partition and a
// filtered one.
func TestFenceMessagesAreSkipped(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	ctx := consumertest.Ctx(t)
	lock := "data/command/shell/m1/.lock"
	fence, err := l.Log.TakeFence(ctx, ledger.FenceRecord{V: ledger.FormatVersion, Ledger: l.UUID, Lock: lock,
		ID: l.Events(t, 1, "x")[0].Commit, Host: "host-a", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	evs := l.Events(t, 10, "a", "b")
	seqs, err := l.Log.Append(ctx, evs, ledger.Fence{Lock: lock, Seq: fence})
	if err != nil {
		t.Fatal(err)
	}
	c2 := l.Commit(t, "c") // the writer's heads know nothing of a and b's commit
	last, err := l.Log.LastSeq(ctx)
	if err != nil || last != c2[0] || seqs[1]+1 != c2[0]-1 {
		t.Fatalf("log: commit at %v, its fence check, then %v; last %d, %v", seqs, c2, last, err)
	}
	for _, parts := range [][]string{nil, {"b"}} {
		h := &recorder{}
		want := []ledger.Seq{seqs[1], c2[0]}
		if parts != nil {
			want = want[:1] // its feed holds b's subject alone
		}
		r, stop := run(t, l, consumers.Config{Handler: h, Partitions: parts, Name: fmt.Sprintf("c%d", len(parts))})
		waitHandled(t, r, want[len(want)-1])
		_ = stop()
		if got := h.seqs(); !slices.Equal(got, want) {
			t.Errorf("consumer of %v: commits %v, want %v", parts, got, want)
		}
		for _, c := range h.commits {
			if parts == nil && !c.Complete() {
				t.Errorf("consumer of %v: commit %d delivered incomplete", parts, c.Seq)
			}
		}
	}
}

func TestFilteredConsumerGetsItsPartsOfEachCommit(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	model := ledger.PartitionKeysForModel("command/shell", "m1")
	_ = l.Commit(t, "a")
	c2 := l.Commit(t, "a", model[0], "c")
	_ = l.Commit(t, "c")
	c4 := l.Commit(t, model[0], model[1])
	c5 := l.Commit(t, model[1], "z")
	h := &recorder{}
	r, stop := run(t, l, consumers.Config{Handler: h, Partitions: model})
	waitHandled(t, r, c5[0])
	_ = stop()
	type got struct {
		Seq   ledger.Seq
		Parts []string
	}
	var gs []got
	for _, c := range h.commits {
		gs = append(gs, got{c.Seq, c.Partitions()})
	}
	want := []got{{c2[2], model[:1]}, {c4[1], model[:2]}, {c5[1], model[1:2]}}
	if diff := cmp.Diff(want, gs); diff != "" {
		t.Errorf("filtered commits (-want +got):\n%s", diff)
	}
	// A different filter under the same name is refused.
	r2, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "test", Handler: h, Partitions: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Run(consumertest.Ctx(t)); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Run with another filter = %v, want ErrInvalid", err)
	}
}

func TestRestartDoesNotRedeliverAcknowledged(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	var want []ledger.Seq
	for range 5 {
		want = append(want, commitSeqs(l.Commit(t, "a"))...)
	}
	h := &recorder{}
	r, stop := run(t, l, consumers.Config{Handler: h})
	waitHandled(t, r, want[4])
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		want = append(want, commitSeqs(l.Commit(t, "b", "a"))...)
	}
	r2, stop2 := run(t, l, consumers.Config{Handler: h})
	waitHandled(t, r2, want[7])
	_ = stop2()
	if diff := cmp.Diff(want, h.seqs()); diff != "" {
		t.Errorf("handled across a restart (-want +got):\n%s", diff)
	}
}

// TestCrashRedeliversHeldCommitsFirst cuts a run's subscription (its process
// dies) while its handler holds a commit (later ones prefetched and unacknowledged): the next run
// must start with that commit, not with the later ones.
func TestCrashRedeliversHeldCommitsFirst(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	var all []ledger.Seq
	for range 20 {
		all = append(all, commitSeqs(l.Commit(t, "a"))...)
	}
	blocked := make(chan struct{})
	h1 := &recorder{fail: func(c consumers.Commit, call int) error {
		if c.Seq == all[5] {
			close(blocked)
			select {} // hangs until the process "dies"
		}
		return nil
	}}
	r1, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "test", Handler: h1, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r1.Run(context.Background()) }()
	<-blocked
	// The acknowledgements of the five commits handled before it may be
	// asynchronous (on a server they are): wait until the feed has them all,
	// or a crash now may lose some and redeliver those commits too
	// (at-least-once allows it; this test is about the held ones).
	consumertest.Wait(t, 10*time.Second, "the first five commits acknowledged", func() bool {
		ps, _ := consumers.Positions(consumertest.Ctx(t), l.Feed)
		return len(ps) == 1 && ps[0].AckFloor >= all[4]
	})
	l.Mem.Disconnect() // the crash: its 15 prefetched commits stay unacknowledged

	h2 := &recorder{}
	r2, stop := run(t, l, consumers.Config{Handler: h2})
	waitHandled(t, r2, all[19])
	_ = stop()
	if diff := cmp.Diff(all[5:], h2.seqs()); diff != "" {
		t.Errorf("second run handled (-want +got):\n%s", diff)
	}
}

func TestStartPositions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		start consumers.Start
		want  []ledger.Seq // of the two commits made first (seqs 1, 2)
	}{
		{consumers.StartAll, []ledger.Seq{1, 2}},
		{consumers.StartAt(2), []ledger.Seq{2}},
		{consumers.StartNew, nil},
	} {
		t.Run(tc.start.String(), func(t *testing.T) {
			t.Parallel() // each on its own ledger
			l := consumertest.New(t, "t")
			l.Commit(t, "a")
			l.Commit(t, "a")
			h := &recorder{}
			name := "start-" + tc.start.String()
			r, stop := run(t, l, consumers.Config{Handler: h, Name: name, Start: tc.start})
			// The consumer exists once the Runner pulls: then a new commit is after "new".
			consumertest.Wait(t, 10*time.Second, "consumer attached", func() bool {
				ps, _ := consumers.Positions(consumertest.Ctx(t), l.Feed)
				for _, p := range ps {
					if p.Name == name && p.Waiting > 0 {
						return true
					}
				}
				return false
			})
			c3 := l.Commit(t, "b")
			waitHandled(t, r, c3[0])
			_ = stop()
			if diff := cmp.Diff(append(tc.want, c3[0]), h.seqs()); diff != "" {
				t.Errorf("start %s (-want +got):\n%s", tc.start, diff)
			}
		})
	}
}

func TestGracefulShutdownFinishesTheHandlerCall(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	c1, c2 := l.Commit(t, "a"), l.Commit(t, "a")
	entered := make(chan struct{})
	ctx, shutdown := context.WithCancel(consumertest.Ctx(t))
	h := &recorder{fail: func(c consumers.Commit, call int) error {
		if c.Seq == c1[0] {
			close(entered)
			<-ctx.Done()                      // working when the shutdown begins,
			time.Sleep(50 * time.Millisecond) // and for a while after
		}
		return nil
	}}
	r, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "test", Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-entered
	shutdown()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := h.seqs(); len(got) == 0 || got[0] != c1[0] {
		t.Fatalf("handled %v, want the in-flight commit %d finished", got, c1[0])
	}
	n := len(h.seqs())
	h2 := &recorder{}
	r2, stop2 := run(t, l, consumers.Config{Handler: h2})
	c3 := l.Commit(t, "a")
	waitHandled(t, r2, c3[0])
	_ = stop2()
	if want := commitSeqs(c1, c2, c3)[n:]; !slices.Equal(h2.seqs(), want) {
		t.Errorf("after restart handled %v, want %v (the drained commit was acknowledged)", h2.seqs(), want)
	}
}

// flushing buffers commits and records what was flushed.
type flushing struct {
	mu       sync.Mutex
	buf      []ledger.Seq
	flushed  []ledger.Seq
	failNext bool
}

func (f *flushing) Handle(_ context.Context, c consumers.Commit) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.flushed); n > 0 && c.Seq <= f.flushed[n-1] {
		return nil // already recorded: the dedupe a Flusher does
	}
	f.buf = append(f.buf, c.Seq)
	return nil
}

func (f *flushing) Flush(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext {
		f.failNext = false
		f.buf = nil
		return errors.New("disk full")
	}
	f.flushed = append(f.flushed, f.buf...)
	f.buf = nil
	return nil
}

func TestFlushFailureStopsAndRedelivers(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	var all []ledger.Seq
	for range 4 {
		all = append(all, commitSeqs(l.Commit(t, "a"))...)
	}
	f := &flushing{failNext: true}
	r, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "test", Handler: f})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(consumertest.Ctx(t)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Run = %v, want the flush error", err)
	}
	r2, stop := run(t, l, consumers.Config{Handler: f})
	waitHandled(t, r2, all[3])
	_ = stop()
	if diff := cmp.Diff(all, f.flushed); diff != "" {
		t.Errorf("flushed (-want +got):\n%s", diff)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	h := &recorder{}
	for _, cfg := range []consumers.Config{
		{Feed: l.Feed, Log: l.Log, Name: "bad.name", Handler: h},
		{Feed: l.Feed, Log: l.Log, Name: "", Handler: h},
		{Feed: l.Feed, Log: l.Log, Name: "x"},
		{Log: l.Log, Name: "x", Handler: h},
		{Feed: l.Feed, Name: "x", Handler: h},
		{Feed: l.Feed, Log: l.Log, Name: "x", Handler: h, MaxDeliver: -1},
		{Feed: l.Feed, Log: l.Log, Name: "x", Handler: h, Partitions: []string{""}},
	} {
		if _, err := consumers.New(cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
	for _, s := range []string{"0", "x", "-1"} {
		if _, err := consumers.ParseStart(s); err == nil {
			t.Errorf("ParseStart(%q) accepted", s)
		}
	}
}

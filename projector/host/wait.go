package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// Every wait of an operation that reaches the ledger — a push (Commit,
// Prepare), a pull (Sync), a fetch — is watched: the operation runs on its
// ports watched (the log, and the blob store under the push's retry bound),
// and its watch knows how long it has waited for an answer. A wait is a
// request to the ledger's server or the blob store with no answer yet;
// an answer is any that moves the operation: a blob stored or read, a
// publish acknowledged, an event read, a byte of content taken or sent, a
// definite refusal (a conflict, not found, a permission). A failure the
// stack retries (a 503, "slow down", a timeout) is no answer: however the
// stores below retry, an operation that gets nothing else gives up at
// Policy.Wait, the one bound of a push that makes no progress. Local work (a walk,
// hashing, writing the cache) is not waiting. Once the operation has waited
// Policy.Report with no answer it says so (Config.Waiting: what it waits for,
// how long, the last failure of a request retried meanwhile), and again
// every four Reports; once it has waited Policy.Wait it gives up: its context
// ends and it returns a *WaitError. What a push had not published then stays
// uncommitted in the cache, for the next Commit.

// Wait is a wait an operation reports (Config.Waiting).
type Wait struct {
	Op    string        // the operation: "commit", "prepare", "sync", "fetch"
	On    string        // what it waits on: "log" (the ledger's server) or "blobs" (the blob store)
	What  string        // what for: "to take the commit", "to store content" …
	For   time.Duration // how long it has waited with no answer
	Limit time.Duration // it gives up once it has waited this long (Policy.Wait)
	Last  error         // the last failure of a request retried meanwhile (nil: none)
}

// Server names what the wait is on.
func (w Wait) Server() string {
	if w.On == "blobs" {
		return "the blob store"
	}
	return "the ledger's server"
}

func (w Wait) String() string { return w.Line(w.Server()) }

// Line is the wait as one line, what it is on named server (Server, or
// Server with the address a command knows it by).
func (w Wait) Line(server string) string {
	s := fmt.Sprintf("%s: waiting for %s %s: no answer for %v", w.Op, server, w.What, RoundWait(w.For))
	if w.Last != nil {
		s += fmt.Sprintf(" (last: %v)", w.Last)
	}
	return s + fmt.Sprintf("; giving up after %v", w.Limit)
}

// RoundWait rounds d for a message: to a tenth of a second below 10 s.
func RoundWait(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// WaitError is an operation that gave up waiting (Policy.Wait): what it
// waited for, and the error it stopped with. errors.Is(err,
// ledger.ErrUnreachable) holds: the server did not answer in time.
type WaitError struct {
	Wait
	Err error
}

func (e *WaitError) Error() string {
	s := fmt.Sprintf("%s: gave up after waiting %v for %s %s", e.Op, RoundWait(e.For), e.Server(), e.What)
	if e.Last != nil {
		s += fmt.Sprintf(" (last: %v)", e.Last)
	}
	return s + ": " + e.Err.Error()
}

func (e *WaitError) Unwrap() error { return e.Err }

// Left says what the operation that gave up left: a push, its changes not
// published uncommitted in the cache (its last commit perhaps stored, when
// the append's answer was what it waited for); a pull, what it pulled.
func (e *WaitError) Left() string {
	if errors.Is(e.Err, ledger.ErrOutcomeUnknown) {
		return "its last commit may have been stored, its answer lost: the changes stay uncommitted in the cache, and the next commit publishes nothing twice"
	}
	switch e.Op {
	case "commit", "prepare":
		return "nothing more was published: the changes not published stay uncommitted in the cache"
	case "sync", "fetch":
		return "what was pulled is kept"
	}
	return "nothing was changed"
}

func (e *WaitError) Is(target error) bool { return target == ledger.ErrUnreachable }

// watch is one operation's watch over its waits.
type watch struct {
	op     string
	wait   time.Duration
	report time.Duration
	tell   func(Wait)
	cancel context.CancelCauseFunc
	timer  *time.Timer

	mu       sync.Mutex
	waiting  int                          // requests in flight
	on, what string                       // what the last request begun waits for
	heard    time.Time                    // the last answer, or when the operation began to wait
	told     time.Time                    // when the present wait was last reported (zero: not yet)
	last     error                        // the last failure of a request retried
	code     func(error) driver.ErrorCode // the blob driver's (bucket)
	// unanswered: the last request ended with no answer; until one comes,
	// the time between requests (a retry's backoff) is waiting too.
	unanswered bool
	gaveUp     *Wait
}

// watching starts the watch of operation op: it returns the context op
// runs under (ended when it gives up waiting) and done, which stops the
// watch and returns op's error — a *WaitError once it gave up. While it
// runs, the Host's ports are watched (logPort, blobsPort).
func (h *Host) watching(ctx context.Context, op string) (context.Context, func(error) error) {
	p := h.cfg.Policy
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watch{op: op, wait: p.wait(), report: p.reportAfter(), tell: h.cfg.Waiting, cancel: cancel}
	if w.tell == nil {
		w.tell = func(wt Wait) { h.log.Warn(wt.String()) }
	}
	ctx = ledger.OnRetry(ctx, w.retried)
	w.timer = time.AfterFunc(w.tick(), w.check)
	prev := h.op
	h.op = &ports{log: watchedLog{h.cfg.Log, w}, blobs: h.cfg.Blobs.WithRetry(p.blobRetry(h.cfg.Blobs.Retry())).View(w.bucket)}
	return ctx, func(err error) error {
		w.timer.Stop()
		h.op = prev
		cancel(nil)
		if err == nil {
			return nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case w.gaveUp != nil:
			return &WaitError{Wait: *w.gaveUp, Err: err}
		case w.unanswered && noAnswer(err):
			// A request below gave up first (a per-request timeout, the
			// store's retries): the same wait, ended sooner.
			return &WaitError{Wait: Wait{Op: w.op, On: w.on, What: w.what, For: time.Since(w.heard), Limit: w.wait}, Err: err}
		}
		return err
	}
}

// ports are the ports of the operation running (watching).
type ports struct {
	log   ledger.CommitLog
	blobs *ledger.Bucket
}

// logPort is the log the running operation uses: watched while it is.
func (h *Host) logPort() ledger.CommitLog {
	if h.op != nil {
		return h.op.log
	}
	return h.cfg.Log
}

// blobsPort is the blob store the running operation uses: watched, under
// the push's retry bound, while it is.
func (h *Host) blobsPort() *ledger.Bucket {
	if h.op != nil {
		return h.op.blobs
	}
	return h.cfg.Blobs
}

// tick is how often the watch looks at its waits.
func (w *watch) tick() time.Duration {
	return max(min(w.report, w.wait)/4, 10*time.Millisecond)
}

// begin starts a request on on (what it waits for).
func (w *watch) begin(on, what string) {
	w.mu.Lock()
	if w.waiting == 0 && !w.unanswered {
		w.heard, w.told = time.Now(), time.Time{}
	}
	w.waiting++
	w.on, w.what = on, what
	w.mu.Unlock()
}

// end ends a request: its answer (err nil, or a definite answer of the
// server's) is heard; a request that got none (a timeout, the connection
// down) or only a failure that is retried (ledger.DefaultRetryable: a 503)
// is the last failure.
func (w *watch) end(err error) {
	w.mu.Lock()
	w.waiting--
	// A driver's error of a known code (not found, a permission) is a
	// definite answer; the Bucket above maps it.
	definite := err != nil && w.code != nil && w.code(err) != driver.Unknown
	if err == nil || !noAnswer(err) && (definite || !ledger.DefaultRetryable(err)) {
		w.heard, w.told, w.unanswered = time.Now(), time.Time{}, false
	} else {
		w.last, w.unanswered = err, true
	}
	w.mu.Unlock()
}

// answered notes an answer within a request (a byte of content, an event).
func (w *watch) answered() {
	w.mu.Lock()
	w.heard, w.told, w.unanswered = time.Now(), time.Time{}, false
	w.mu.Unlock()
}

// taken notes content a put read or sent (driver.Progress): an answer,
// unless the last request got none — a retry reads its content again, and
// a small content fills the connection's buffers before the store reads a
// byte of it; only a request answered, or a large content flowing, shows
// the store is there.
func (w *watch) taken() {
	w.mu.Lock()
	if !w.unanswered {
		w.heard, w.told = time.Now(), time.Time{}
	}
	w.mu.Unlock()
}

// retried takes a request retried below a port (ledger.NoteRetry).
func (w *watch) retried(_ string, err error) {
	w.mu.Lock()
	w.last = err
	w.mu.Unlock()
}

// noAnswer reports whether err is a request that got no answer.
func noAnswer(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, ledger.ErrUnreachable) || errors.As(err, &t) && t.Timeout()
}

// check looks at the waits: it reports one that lasted Report, and gives up
// on one that lasted Wait.
func (w *watch) check() {
	w.mu.Lock()
	now := time.Now()
	var tell *Wait
	if (w.waiting > 0 || w.unanswered) && w.gaveUp == nil {
		wt := Wait{Op: w.op, On: w.on, What: w.what, For: now.Sub(w.heard), Limit: w.wait, Last: w.last}
		switch {
		case wt.For >= w.wait:
			w.gaveUp = &wt
			w.cancel(fmt.Errorf("gave up after waiting %v for %s %s", w.wait, wt.Server(), wt.What))
		case wt.For >= w.report && (w.told.IsZero() || now.Sub(w.told) >= 4*w.report):
			w.told, tell = now, &wt
		}
	}
	if w.gaveUp == nil {
		w.timer.Reset(w.tick())
	}
	w.mu.Unlock()
	if tell != nil {
		w.tell(*tell)
	}
}

// watchedLog is a log whose requests the watch times.
type watchedLog struct {
	ledger.CommitLog
	w *watch
}

func (l watchedLog) Info(ctx context.Context) (ledger.Info, error) {
	l.w.begin("log", "to answer")
	i, err := l.CommitLog.Info(ctx)
	l.w.end(err)
	return i, err
}

func (l watchedLog) LastSeq(ctx context.Context) (ledger.Seq, error) {
	l.w.begin("log", "to answer")
	s, err := l.CommitLog.LastSeq(ctx)
	l.w.end(err)
	return s, err
}

func (l watchedLog) Head(ctx context.Context, req ledger.HeadRequest) (ledger.Head, error) {
	l.w.begin("log", "to answer")
	hd, err := l.CommitLog.Head(ctx, req)
	l.w.end(err)
	return hd, err
}

func (l watchedLog) PartitionTip(ctx context.Context, p string) (ledger.Seq, string, error) {
	l.w.begin("log", "to answer")
	s, c, err := l.CommitLog.PartitionTip(ctx, p)
	l.w.end(err)
	return s, c, err
}

func (l watchedLog) CommitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	l.w.begin("log", "to answer")
	c, err := l.CommitLog.CommitAt(ctx, seq)
	l.w.end(err)
	return c, err
}

func (l watchedLog) PartitionLastSeq(ctx context.Context, p string) (ledger.Seq, error) {
	l.w.begin("log", "to answer")
	s, err := l.CommitLog.PartitionLastSeq(ctx, p)
	l.w.end(err)
	return s, err
}

func (l watchedLog) PartitionHead(ctx context.Context, p string) (ledger.Record, error) {
	l.w.begin("log", "to answer")
	r, err := l.CommitLog.PartitionHead(ctx, p)
	l.w.end(err)
	return r, err
}

func (l watchedLog) Append(ctx context.Context, events []ledger.Event, fences ...ledger.Fence) ([]ledger.Seq, error) {
	l.w.begin("log", "to take the commit")
	s, err := l.CommitLog.Append(ctx, events, fences...)
	l.w.end(err)
	return s, err
}

func (l watchedLog) Read(ctx context.Context, from, to ledger.Seq, fn func(ledger.Record) error) error {
	l.w.begin("log", "to send the ledger's events")
	err := l.CommitLog.Read(ctx, from, to, l.each(fn))
	l.w.end(err)
	return err
}

func (l watchedLog) ReadPartition(ctx context.Context, p string, from ledger.Seq, fn func(ledger.Record) error) error {
	l.w.begin("log", "to send the ledger's events")
	err := l.CommitLog.ReadPartition(ctx, p, from, l.each(fn))
	l.w.end(err)
	return err
}

// each is fn, each record an answer, and fn's work not a wait.
func (l watchedLog) each(fn func(ledger.Record) error) func(ledger.Record) error {
	return func(rec ledger.Record) error {
		l.w.end(nil)
		err := fn(rec)
		l.w.begin("log", "to send the ledger's events")
		return err
	}
}

// bucket is the blob driver d watched (a Bucket's View).
func (w *watch) bucket(d driver.Bucket) driver.Bucket {
	w.mu.Lock()
	w.code = d.ErrorCode
	w.mu.Unlock()
	return watchedBucket{d, w}
}

// watchedBucket is a blob driver whose requests the watch times: each
// attempt of the Bucket above it is one request.
type watchedBucket struct {
	driver.Bucket
	w *watch
}

func (b watchedBucket) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return b.w.put(ctx, b.Bucket.Put, key, r, size)
}

func (b watchedBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.w.begin("blobs", "to send content")
	rc, err := b.Bucket.Get(ctx, key)
	b.w.end(why(ctx, err))
	if err != nil {
		return nil, err
	}
	return &watchedBody{rc, b.w}, nil
}

func (b watchedBucket) Stat(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	return b.w.stat(ctx, b.Bucket.Stat, key)
}

func (b watchedBucket) Delete(ctx context.Context, key string) error {
	b.w.begin("blobs", "to answer")
	err := b.Bucket.Delete(ctx, key)
	b.w.end(why(ctx, err))
	return err
}

func (b watchedBucket) List(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	b.w.begin("blobs", "to list its objects")
	err := b.Bucket.List(ctx, prefix, func(info ledger.ObjectInfo) error {
		b.w.answered()
		return fn(info)
	})
	b.w.end(err)
	return err
}

func (b watchedBucket) NewBatch() driver.Batch { return watchedBatch{b.Bucket.NewBatch(), b.w} }

// Close does not close the driver: the watched view is the operation's.
func (b watchedBucket) Close() error { return nil }

type watchedBatch struct {
	driver.Batch
	w *watch
}

func (b watchedBatch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return b.w.put(ctx, b.Batch.Put, key, r, size)
}

func (b watchedBatch) Stat(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	return b.w.stat(ctx, b.Batch.Stat, key)
}

func (b watchedBatch) Flush(ctx context.Context) error {
	b.w.begin("blobs", "to make the content durable")
	err := b.Batch.Flush(ctx)
	b.w.end(why(ctx, err))
	return err
}

// put times a put: each step of its sending its driver reports
// (driver.Progress), and each read of its content, is an answer, but after
// a request that got none (taken).
func (w *watch) put(ctx context.Context, put func(context.Context, string, io.Reader, int64) error, key string, r io.Reader, size int64) error {
	w.begin("blobs", "to store content")
	err := put(driver.WithProgress(ctx, w.taken), key, &takenBody{r, w}, size)
	w.end(why(ctx, err))
	return err
}

func (w *watch) stat(ctx context.Context, stat func(context.Context, string) (ledger.ObjectInfo, error), key string) (ledger.ObjectInfo, error) {
	w.begin("blobs", "to answer")
	info, err := stat(ctx, key)
	w.end(why(ctx, err))
	return info, err
}

// why is err, or, when the request's context was ended with a cause (the
// Bucket's bound on an attempt), that cause: what the SDKs report as "context
// canceled".
func why(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil && c != ctx.Err() {
			return c
		}
	}
	return err
}

// takenBody is a put's content: each read of the store's an answer.
type takenBody struct {
	r io.Reader
	w *watch
}

func (t *takenBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.w.taken()
	}
	return n, err
}

// watchedBody is a get's body: each read a request, its bytes an answer.
type watchedBody struct {
	io.ReadCloser
	w *watch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.begin("blobs", "to send content")
	n, err := b.ReadCloser.Read(p)
	if n > 0 || err == io.EOF {
		b.w.end(nil)
	} else {
		b.w.end(err)
	}
	return n, err
}

// Package faulty injects storage and network faults for tests, deterministically
// from a seed: a wrapper of a blob driver (Store, a driver.Bucket whose batches
// draw faults too, so tests take production's batched path) with 5xx-like errors, timeouts,
// connection resets, truncated bodies, slow responses and lost acknowledgements;
// an http.RoundTripper (Transport) doing the same at the HTTP level in front of
// an S3 or GCS server (gofakes3, fake-gcs-server, a real one); and a TCP proxy
// (Proxy) that drops connections, for NATS.
//
// Whether a call gets a fault, and which, is a function of the seed, the
// operation, the key (or request path) and how many times that operation has
// been called on that key — not of goroutine scheduling — so a run with
// parallel transfers draws the same faults for the same calls every time.
//
// Nothing here is for production: the package exists so the fault tests of
// every backend and of the projector shell share one vocabulary of faults and
// one workload (Exercise).
package faulty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger/driver"
)

// Fault is one kind of injected failure.
type Fault uint8

const (
	// ServerError fails the call at once, as a 5xx answer: nothing was done.
	ServerError Fault = iota + 1
	// Timeout makes the call hang until its context ends (at most Config.Hang),
	// then fail with an error whose Timeout method reports true: nothing was done.
	Timeout
	// Reset is a connection reset: a put reads part of its content and fails
	// with nothing stored; a get's body fails part way.
	Reset
	// Truncate cuts a get's body short with a clean EOF, as a proxy that lost
	// the end of a response would (puts: a server error).
	Truncate
	// Slow delays the call by Config.Delay and dribbles a get's body: reads of
	// at most 512 bytes, with a quarter of Delay before the first and after
	// each further 64 KiB.
	Slow
	// LostAck makes a put (or delete) happen and then fail, as a response lost
	// after the server acted.
	LostAck
)

var faultNames = map[Fault]string{
	ServerError: "server-error", Timeout: "timeout", Reset: "reset", Truncate: "truncate", Slow: "slow", LostAck: "lost-ack",
}

func (f Fault) String() string {
	if n, ok := faultNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// All lists every fault.
var All = []Fault{ServerError, Timeout, Reset, Truncate, Slow, LostAck}

// ErrInjected is wrapped by every error this package injects.
var ErrInjected = errors.New("injected fault")

// Error is an injected failure.
type Error struct {
	Op    string
	Key   string
	Fault Fault
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %v (%v)", e.Op, e.Key, e.Fault, ErrInjected)
}

func (e *Error) Unwrap() error { return ErrInjected }

// Timeout reports whether the failure is a timeout (net.Error's method).
func (e *Error) Timeout() bool { return e.Fault == Timeout }

// Temporary reports true: every injected failure is transient.
func (e *Error) Temporary() bool { return true }

// Config says which faults to inject and how often.
type Config struct {
	// Seed makes the draws reproducible.
	Seed uint64
	// Rate is the probability that a call gets a fault, in [0, 1].
	Rate float64
	// Faults are drawn from; empty means All.
	Faults []Fault
	// Delay is how long Slow delays; 0 means 20 ms.
	Delay time.Duration
	// Hang bounds how long Timeout hangs when the context has no deadline; 0
	// means 2 s.
	Hang time.Duration
}

func (c Config) withDefaults() Config {
	if len(c.Faults) == 0 {
		c.Faults = All
	}
	if c.Delay <= 0 {
		c.Delay = 20 * time.Millisecond
	}
	if c.Hang <= 0 {
		c.Hang = 2 * time.Second
	}
	return c
}

// dice draws faults deterministically and counts them.
type dice struct {
	mu     sync.Mutex
	cfg    Config
	calls  map[string]uint64
	counts map[Fault]int
	off    bool
}

func newDice(cfg Config) *dice {
	return &dice{cfg: cfg.withDefaults(), calls: map[string]uint64{}, counts: map[Fault]int{}}
}

// draw returns the fault of the n-th call of op on key (0: none), among allowed.
func (d *dice) draw(op, key string, allowed ...Fault) Fault {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := op + "\x00" + key
	n := d.calls[id]
	d.calls[id] = n + 1
	if d.off || d.cfg.Rate <= 0 {
		return 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d", d.cfg.Seed, id, n)
	x := splitmix(h.Sum64())
	if float64(x>>11)/(1<<53) >= d.cfg.Rate {
		return 0
	}
	var pool []Fault
	for _, f := range d.cfg.Faults {
		if len(allowed) == 0 || contains(allowed, f) {
			pool = append(pool, f)
		}
	}
	if len(pool) == 0 {
		return 0
	}
	f := pool[splitmix(x)%uint64(len(pool))]
	d.counts[f]++
	return f
}

func contains(fs []Fault, f Fault) bool {
	for _, g := range fs {
		if g == f {
			return true
		}
	}
	return false
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Counts returns how many faults of each kind were injected.
func (d *dice) Counts() map[Fault]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[Fault]int, len(d.counts))
	for f, n := range d.counts {
		out[f] = n
	}
	return out
}

// Total returns how many faults were injected.
func (d *dice) Total() int {
	n := 0
	for _, c := range d.Counts() {
		n += c
	}
	return n
}

// SetEnabled turns injection on or off (the draws go on, so re-enabling does
// not replay the same faults).
func (d *dice) SetEnabled(on bool) {
	d.mu.Lock()
	d.off = !on
	d.mu.Unlock()
}

// hang waits for ctx to end or Hang to pass, and returns the timeout error.
func (d *dice) hang(ctx context.Context, op, key string) error {
	t := time.NewTimer(d.cfg.Hang)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return &Error{Op: op, Key: key, Fault: Timeout}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Store is a driver.Bucket that injects faults into another, its batches'
// puts and stats included (a batch's Flush gets none: it is not retried).
type Store struct {
	*dice
	inner driver.Bucket
}

var _ driver.Bucket = (*Store)(nil)

// New wraps inner.
func New(inner driver.Bucket, cfg Config) *Store {
	return &Store{dice: newDice(cfg), inner: inner}
}

// Inner returns the wrapped driver (for checks that must not see faults).
func (s *Store) Inner() driver.Bucket { return s.inner }

// ErrorCode implements driver.Bucket: an injected fault is transient.
func (s *Store) ErrorCode(err error) driver.ErrorCode {
	if errors.Is(err, ErrInjected) {
		return driver.Unknown
	}
	return s.inner.ErrorCode(err)
}

// PreferPut implements driver.Bucket: the wrapped driver's.
func (s *Store) PreferPut(size int64) bool { return s.inner.PreferPut(size) }

// Close implements driver.Bucket: it closes the wrapped driver.
func (s *Store) Close() error { return s.inner.Close() }

// NewBatch implements driver.Bucket: the wrapped driver's batch, its puts
// and stats drawing faults as the store's do.
func (s *Store) NewBatch() driver.Batch { return &batch{s: s, b: s.inner.NewBatch()} }

type batch struct {
	s *Store
	b driver.Batch
}

func (b *batch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return b.s.put(ctx, b.b.Put, key, r, size)
}

func (b *batch) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	return b.s.stat(ctx, b.b.Stat, key)
}

func (b *batch) Flush(ctx context.Context) error { return b.b.Flush(ctx) }

// Put implements driver.Bucket.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, s.inner.Put, key, r, size)
}

func (s *Store) put(ctx context.Context, put func(context.Context, string, io.Reader, int64) error, key string, r io.Reader, size int64) error {
	switch f := s.draw("put", key, ServerError, Timeout, Reset, Slow, LostAck); f {
	case ServerError:
		return &Error{Op: "put", Key: key, Fault: f}
	case Timeout:
		return s.hang(ctx, "put", key)
	case Reset:
		// Read part of the content, as a connection that broke mid-upload.
		_, _ = io.CopyN(io.Discard, r, max(size/2, 1))
		return &Error{Op: "put", Key: key, Fault: f}
	case Slow:
		sleep(ctx, s.cfg.Delay)
	case LostAck:
		if err := put(ctx, key, r, size); err != nil {
			return err
		}
		return &Error{Op: "put", Key: key, Fault: f}
	}
	return put(ctx, key, r, size)
}

// Get implements driver.Bucket.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f := s.draw("get", key, ServerError, Timeout, Reset, Truncate, Slow)
	switch f {
	case ServerError:
		return nil, &Error{Op: "get", Key: key, Fault: f}
	case Timeout:
		return nil, s.hang(ctx, "get", key)
	}
	rc, err := s.inner.Get(ctx, key)
	if err != nil || f == 0 {
		return rc, err
	}
	return &faultyBody{ReadCloser: rc, ctx: ctx, key: key, fault: f, delay: s.cfg.Delay}, nil
}

// faultyBody fails, truncates or slows a body after its first bytes.
type faultyBody struct {
	io.ReadCloser
	ctx   context.Context
	key   string
	fault Fault
	delay time.Duration
	n     int // Reset, Truncate: bytes passed on
	slow  int // Slow: bytes passed on since the last pause
	done  bool
}

// slowPause is how much of a Slow body arrives between pauses.
const slowPause = 64 << 10

func (b *faultyBody) Read(p []byte) (int, error) {
	if b.done {
		if b.fault == Reset {
			return 0, &Error{Op: "get", Key: b.key, Fault: Reset}
		}
		return 0, io.EOF
	}
	switch b.fault {
	case Slow:
		if b.slow == 0 {
			sleep(b.ctx, b.delay/4)
		}
		n, err := b.ReadCloser.Read(p[:min(len(p), 512)])
		if b.slow += n; b.slow >= slowPause {
			b.slow = 0
		}
		return n, err
	case Reset, Truncate:
		// Half of the first read arrives, then the body breaks (Reset) or
		// ends (Truncate).
		n, err := b.ReadCloser.Read(p)
		if n <= 1 {
			if err == io.EOF && n == 0 && b.fault == Truncate && b.n == 0 {
				return 0, io.EOF // empty object: nothing to cut
			}
			b.done = true
			return 0, nil
		}
		b.n += n / 2
		b.done = true
		return n / 2, nil
	}
	return b.ReadCloser.Read(p)
}

// Stat implements driver.Bucket.
func (s *Store) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	return s.stat(ctx, s.inner.Stat, key)
}

func (s *Store) stat(ctx context.Context, stat func(context.Context, string) (driver.ObjectInfo, error), key string) (driver.ObjectInfo, error) {
	switch f := s.draw("stat", key, ServerError, Timeout, Slow); f {
	case ServerError:
		return driver.ObjectInfo{}, &Error{Op: "stat", Key: key, Fault: f}
	case Timeout:
		return driver.ObjectInfo{}, s.hang(ctx, "stat", key)
	case Slow:
		sleep(ctx, s.cfg.Delay)
	}
	return stat(ctx, key)
}

// Delete implements driver.Bucket.
func (s *Store) Delete(ctx context.Context, key string) error {
	switch f := s.draw("delete", key, ServerError, Timeout, LostAck); f {
	case ServerError:
		return &Error{Op: "delete", Key: key, Fault: f}
	case Timeout:
		return s.hang(ctx, "delete", key)
	case LostAck:
		if err := s.inner.Delete(ctx, key); err != nil {
			return err
		}
		return &Error{Op: "delete", Key: key, Fault: f}
	}
	return s.inner.Delete(ctx, key)
}

// List implements driver.Bucket.
func (s *Store) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	f := s.draw("list", prefix, ServerError, Reset, Slow)
	switch f {
	case ServerError:
		return &Error{Op: "list", Key: prefix, Fault: f}
	case Slow:
		sleep(ctx, s.cfg.Delay)
	}
	n := 0
	err := s.inner.List(ctx, prefix, func(info driver.ObjectInfo) error {
		if f == Reset && n == 1 {
			return &Error{Op: "list", Key: prefix, Fault: Reset} // after one object
		}
		n++
		return fn(info)
	})
	if f == Reset && n <= 1 && err == nil {
		return &Error{Op: "list", Key: prefix, Fault: Reset}
	}
	return err
}

// ReadAll reads a whole object of a driver without faults (for checks).
func ReadAll(ctx context.Context, objs driver.Bucket, key string) ([]byte, error) {
	if s, ok := objs.(*Store); ok {
		objs = s.inner
	}
	rc, err := objs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(rc)
	return b.Bytes(), err
}

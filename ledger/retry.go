package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"time"

	"github.com/syncledger/syncledger/ledger/driver"
)

// RetryPolicy is a Bucket's one retry policy, for every driver: each
// operation is attempted again, with backoff, while its error may be
// transient (the driver's ErrorCode is driver.Unknown and Retryable says so),
// up to Attempts attempts, and never after the caller's context is done. The
// last error is returned naming the attempts. No driver retries under it:
// the storage clients' own retries are off (ledger/s3blob, ledger/gcsblob).
//
// What is retried: a put's content is sent again from its start — the
// caller's reader sought back if it can seek (a file, a bytes.Reader: a
// host's commit puts those), whatever its length; else the bytes read are
// kept as they are read, up to MaxReplay, and a longer content is not sent
// again. A get's body that
// fails part way (a reset connection, a body cut short with an error) is
// opened again and continued where it stopped, after checking that the bytes
// before that point are those already delivered (ErrChecksum if not); a body
// that ends early with a clean EOF is not detected here, the blob
// verification catches it. A list that fails part way is listed again from
// the start, skipping the keys already passed to fn. A batch's Flush is not
// retried: a failed fsync, or an acknowledgement lost, leaves the batch's
// durability unknown, which only putting its objects again settles.
//
// Bounds: one operation makes at most Attempts attempts, and waits between
// them at most Wait·1.5, 2·Wait·1.5, … (doubling, capped at MaxWait·1.5):
// with the zero policy, 4 attempts and at most 75 + 150 + 300 ms = 525 ms of
// waiting. Each attempt lasts at most AttemptTimeout when that is set (a get
// opens within it, and its body is read for as long as the caller reads; a
// put waits at most that long for the store to take more of its content or
// answer), and
// otherwise as long as the driver's request (natsblob: 5 s a chunk request, its
// ReadTimeout a read; S3 and GCS: their HTTP client's timeouts) and the
// caller's context allow. So the worst case of one operation is
// Attempts·AttemptTimeout + the waits: with the zero policy and an
// AttemptTimeout of T, 4T + 525 ms. A get's body is resumed at most
// Attempts-1 times, each after a pause of Wait.
//
// The zero value is usable: 4 attempts, 50 ms doubling to at most 2 s between
// them, no per-attempt timeout, 8 MiB of put content kept for replay.
type RetryPolicy struct {
	// Attempts is the most attempts one operation makes (1: no retry); 0 means 4.
	Attempts int
	// Wait is the pause before the second attempt, doubled (with jitter) before
	// each later one up to MaxWait; 0 means 50 ms, MaxWait 0 means 2 s.
	Wait, MaxWait time.Duration
	// AttemptTimeout, when positive, bounds each attempt of Stat, Delete and
	// List, and the opening of a Get (not the reading of its body), so a
	// request that hangs is abandoned and retried; and each attempt of a put
	// (PutObject, Put, a batch's) while the store takes none of its content:
	// the bound starts again at each read of it, so the put of a large file
	// on a slow link is never cut while its bytes flow, and one the store
	// stops reading, or reads whole and never answers, ends AttemptTimeout
	// after the store last read from it.
	AttemptTimeout time.Duration
	// MaxReplay is how many bytes of a put's content whose reader cannot seek
	// are kept to send it again; a failed put whose content was longer is not
	// retried. 0 means 8 MiB.
	MaxReplay int64
	// Retryable decides which errors of code driver.Unknown are transient;
	// nil means DefaultRetryable.
	Retryable func(error) bool
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 4
	}
	if p.Wait <= 0 {
		p.Wait = 50 * time.Millisecond
	}
	if p.MaxWait <= 0 {
		p.MaxWait = 2 * time.Second
	}
	if p.MaxReplay <= 0 {
		p.MaxReplay = 8 << 20
	}
	if p.Retryable == nil {
		p.Retryable = DefaultRetryable
	}
	return p
}

// DefaultRetryable reports whether err may be transient: everything except
// the ledger's sentinels for definite answers (ErrNotFound, ErrNoBucket,
// ErrPermission, ErrInvalid, ErrChecksum, ErrTooLarge, ErrUnknownVersion,
// ErrLineage, ErrConflict, ErrServerFull: the server says so at once, and says
// it again until space is freed; ErrLockLost: another holder took the lock,
// and it stays taken), cancellation, and HTTP statuses 4xx other
// than 408 and 429 (as SDK errors with an HTTPStatusCode method report them).
// A deadline is retryable: the caller's own context ending stops the retries
// anyway.
func DefaultRetryable(err error) bool {
	if err == nil {
		return false
	}
	for _, final := range []error{ErrNotFound, ErrNoBucket, ErrPermission, ErrInvalid, ErrChecksum, ErrTooLarge, ErrUnknownVersion, ErrLineage, ErrConflict, ErrServerFull, ErrLockLost, context.Canceled} {
		if errors.Is(err, final) {
			return false
		}
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		c := status.HTTPStatusCode()
		return c < 400 || c >= 500 || c == 408 || c == 429
	}
	return true
}

// final marks an error that ends the retries at once.
type final struct{ err error }

func (f final) Error() string { return f.err.Error() }
func (f final) Unwrap() error { return f.err }

// do runs op on key under the policy, each attempt bounded by
// AttemptTimeout.
func (b *Bucket) do(ctx context.Context, op, key string, fn func(ctx context.Context) error) error {
	return b.try(ctx, op, key, b.p.AttemptTimeout, fn)
}

// try runs fn until it succeeds, fails for good, or runs out of attempts,
// each attempt bounded by timeout when it is positive.
func (b *Bucket) try(ctx context.Context, op, key string, timeout time.Duration, fn func(ctx context.Context) error) error {
	if f := b.attempts(ctx, timeout, fn); f.err != nil {
		return fail(ctx, op, key, f.code, f.err, f.tries)
	}
	return nil
}

// failure is how an operation's attempts ended: err (nil: it succeeded), the
// code the driver gave it, and which attempt it was.
type failure struct {
	err   error
	code  driver.ErrorCode
	tries string
}

// attempts runs fn until it succeeds, fails for good, or runs out of
// attempts, each attempt bounded by timeout when it is positive. Its failure
// is not yet the operation's error (fail makes it one): a caller that only
// asks whether something is absent pays for no error.
func (b *Bucket) attempts(ctx context.Context, timeout time.Duration, fn func(ctx context.Context) error) failure {
	wait := b.p.Wait
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(nil)
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		}
		err := fn(actx)
		if cancel != nil {
			cancel()
		}
		if err == nil {
			return failure{}
		}
		if f, ok := err.(final); ok {
			return failure{f.err, driver.Unknown, b.tries(attempt)}
		}
		code := b.d.ErrorCode(err)
		switch {
		case code != driver.Unknown || ctx.Err() != nil || !b.p.Retryable(err):
			return failure{err, code, b.tries(attempt)}
		case attempt >= b.p.Attempts:
			tries := ""
			if attempt > 1 {
				tries = fmt.Sprintf("gave up after %d attempts", attempt)
			}
			return failure{err, code, tries}
		}
		if SleepCtx(ctx, wait+rand.N(wait/2+1)) != nil {
			return failure{err, code, fmt.Sprintf("after %d attempts", attempt)}
		}
		wait = min(2*wait, b.p.MaxWait)
	}
}

// tries names the attempt that failed for good, after the first.
func (b *Bucket) tries(attempt int) string {
	if attempt == 1 {
		return ""
	}
	return fmt.Sprintf("attempt %d of %d", attempt, b.p.Attempts)
}

// SleepCtx waits d or until ctx is done (then it returns ctx.Err()).
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// getResumed opens key, continuing a body that fails part way from a new get.
func (b *Bucket) getResumed(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := b.openBody(ctx, key)
	if err != nil || b.p.Attempts == 1 {
		return rc, err // one attempt: nothing to resume with
	}
	return &resumingReader{ctx: ctx, b: b, key: key, rc: rc, sum: crc32.New(crc32.MakeTable(crc32.Castagnoli))}, nil
}

// openBody opens key, retrying; with an attempt timeout, only the opening is
// bounded, the body stays readable until Close.
func (b *Bucket) openBody(ctx context.Context, key string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := b.try(ctx, opGet, key, 0, func(ctx context.Context) error {
		octx, cancel := context.WithCancel(ctx)
		var t *time.Timer
		if b.p.AttemptTimeout > 0 {
			t = time.AfterFunc(b.p.AttemptTimeout, cancel)
		}
		r, err := b.d.Get(octx, key)
		if t != nil && !t.Stop() && err == nil {
			r.Close()
			err = fmt.Errorf("open took longer than %v: %w", b.p.AttemptTimeout, context.DeadlineExceeded)
		}
		if err != nil {
			cancel()
			return err
		}
		rc = &cancelCloser{ReadCloser: r, cancel: cancel}
		return nil
	})
	return rc, err
}

type cancelCloser struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelCloser) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// resumingReader continues a body that failed part way from a new get.
type resumingReader struct {
	ctx     context.Context
	b       *Bucket
	key     string
	rc      io.ReadCloser
	n       int64       // bytes delivered
	sum     hash.Hash32 // of the bytes delivered
	pending error       // an error that came with data, reported on the next read
	resumes int
}

func (r *resumingReader) Read(p []byte) (int, error) {
	for {
		var n int
		err := r.pending
		r.pending = nil
		if err == nil {
			n, err = r.rc.Read(p)
			r.n += int64(n)
			r.sum.Write(p[:n])
		}
		switch {
		case err == nil || err == io.EOF:
			return n, err
		case n > 0:
			r.pending = err // deliver what arrived first
			return n, nil
		case r.ctx.Err() != nil || r.b.d.ErrorCode(err) != driver.Unknown || !r.b.p.Retryable(err) || r.resumes+1 >= r.b.p.Attempts:
			return 0, err
		}
		r.resumes++
		if rerr := r.resume(); rerr != nil {
			return 0, fmt.Errorf("%w (resuming get object %s at byte %d: %w)", err, r.key, r.n, rerr)
		}
	}
}

// resume opens the object again and skips the bytes delivered, checking them.
func (r *resumingReader) resume() error {
	r.rc.Close()
	if err := SleepCtx(r.ctx, r.b.p.Wait); err != nil {
		return err
	}
	rc, err := r.b.openBody(r.ctx, r.key)
	if err != nil {
		return err
	}
	r.rc = rc
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.CopyN(h, rc, r.n); err != nil {
		return fmt.Errorf("skip %d bytes: %w", r.n, err)
	}
	if h.Sum32() != r.sum.Sum32() {
		return fmt.Errorf("object %s changed between attempts: %w", r.key, ErrChecksum)
	}
	return nil
}

func (r *resumingReader) Close() error { return r.rc.Close() }

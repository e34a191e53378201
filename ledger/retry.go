package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds the retries of an ObjectStore made by NewRetryingStore.
// The zero value is usable: 4 attempts, 50 ms doubling to at most 2 s between
// them, no per-attempt timeout, 8 MiB of put content kept for replay.
type RetryPolicy struct {
	// Attempts is the most attempts one operation makes (1: no retry); 0 means 4.
	Attempts int
	// Wait is the pause before the second attempt, doubled (with jitter) before
	// each later one up to MaxWait; 0 means 50 ms, MaxWait 0 means 2 s.
	Wait, MaxWait time.Duration
	// AttemptTimeout, when positive, bounds each attempt of Put, Stat, Delete
	// and List, and the opening of a Get (not the reading of its body), so a
	// request that hangs is abandoned and retried.
	AttemptTimeout time.Duration
	// MaxReplay is how many bytes of a put's content are kept to send it again;
	// a failed put whose content was longer is not retried. 0 means 8 MiB.
	MaxReplay int64
	// Retryable decides which errors are transient; nil means DefaultRetryable.
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
// the ledger's sentinels for definite answers (ErrNotFound, ErrInvalid,
// ErrChecksum, ErrTooLarge, ErrUnknownVersion, ErrLineage, ErrConflict,
// ErrServerFull: the server says so at once, and says it again until space is
// freed), cancellation, and HTTP statuses 4xx other than 408 and 429 (as SDK errors
// with an HTTPStatusCode method report them). A deadline is retryable: the
// caller's own context ending stops the retries anyway.
func DefaultRetryable(err error) bool {
	if err == nil {
		return false
	}
	for _, final := range []error{ErrNotFound, ErrInvalid, ErrChecksum, ErrTooLarge, ErrUnknownVersion, ErrLineage, ErrConflict, ErrServerFull, context.Canceled} {
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

// NewRetryingStore returns objs with transient failures retried under p: a
// failed operation is attempted again, with backoff, while p.Retryable says
// its error may be transient, up to p.Attempts attempts, and never after ctx
// is done. The last error is returned wrapped, naming the attempts.
//
// A put's content is read once from the caller's reader; the bytes read are
// kept (up to p.MaxReplay) to send them again. A get's body that fails part
// way (a reset connection, a body cut short with an error) is opened again and
// continued where it stopped, after checking that the bytes before that point
// are those already delivered (ErrChecksum if not). A body that ends early
// with a clean EOF is not detected here: BlobStore's verification catches it.
// A list that fails part way is listed again from the start, skipping the keys
// already passed to fn (lexical order makes that exact); fn's own errors are
// returned as they are, never retried.
//
// A store whose client retries its own requests (a RequestRetrier, such as
// the S3 store on the AWS SDK's retryer) is not retried again: its client
// makes up to p.Attempts attempts of each request (with its own backoff), each
// operation is one call (bounded by p.AttemptTimeout, its client's retries
// included), its put content is not kept, and only a get body that fails part
// way is resumed, which no request retry covers. One retry layer, not two.
//
// NewBlobStore(NewRetryingStore(objs, p)) is a BlobStore with retries under
// its verification, and its Objects returns the (retrying) object store.
func NewRetryingStore(objs ObjectStore, p RetryPolicy) ObjectStore {
	s := &retryingStore{objs: objs, p: p.withDefaults()}
	s.ops = s.p.Attempts
	if rr, ok := objs.(RequestRetrier); ok {
		s.objs, s.ops = rr.RetryRequests(s.p.Attempts), 1
	}
	return s
}

// RequestRetrier is implemented by an ObjectStore whose client retries its
// failed requests itself; NewRetryingStore does not retry them again.
type RequestRetrier interface {
	// RetryRequests returns the store with each request attempted up to
	// attempts times by its client (unless the client's own configuration
	// names the number).
	RetryRequests(attempts int) ObjectStore
}

type retryingStore struct {
	objs ObjectStore
	p    RetryPolicy
	ops  int // attempts of one operation: p.Attempts, or 1 for a RequestRetrier
}

// PreferPut forwards the wrapped store's PutPreferrer.
func (s *retryingStore) PreferPut(size int64) bool { return PreferPut(s.objs, size) }

// final marks an error that ends the retries at once.
type final struct{ err error }

func (f final) Error() string { return f.err.Error() }
func (f final) Unwrap() error { return f.err }

// do runs op until it succeeds, fails for good, or runs out of attempts.
func (s *retryingStore) do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	wait := s.p.Wait
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if s.p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, s.p.AttemptTimeout)
		}
		err := op(actx)
		cancel()
		var f final
		switch {
		case err == nil:
			return nil
		case errors.As(err, &f):
			return f.err
		case ctx.Err() != nil || !s.p.Retryable(err):
			if attempt > 1 {
				return fmt.Errorf("%s: attempt %d of %d: %w", what, attempt, s.ops, err)
			}
			return err
		case s.ops == 1:
			return err // the store's client retried
		case attempt >= s.ops:
			return fmt.Errorf("%s: gave up after %d attempts: %w", what, attempt, err)
		}
		if serr := SleepCtx(ctx, wait+rand.N(wait/2+1)); serr != nil {
			return fmt.Errorf("%s: %w after %d attempts (last: %v)", what, serr, attempt, err)
		}
		wait = min(2*wait, s.p.MaxWait)
	}
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

// replayReader reads the caller's reader once, keeping what it read so a
// retried put can send it again.
type replayReader struct {
	r        io.Reader
	kept     bytes.Buffer
	max      int64
	overflow bool
	err      error // the caller's reader's error, final
}

func (rr *replayReader) Read(p []byte) (int, error) {
	if rr.err != nil {
		return 0, rr.err
	}
	n, err := rr.r.Read(p)
	if !rr.overflow {
		if int64(rr.kept.Len()+n) > rr.max {
			rr.overflow = true
			rr.kept = bytes.Buffer{}
		} else {
			rr.kept.Write(p[:n])
		}
	}
	if err != nil {
		rr.err = err
	}
	return n, err
}

// again returns a reader of the same content from the start: the bytes kept,
// then the rest of the caller's reader.
func (rr *replayReader) again() io.Reader {
	return io.MultiReader(bytes.NewReader(bytes.Clone(rr.kept.Bytes())), rr)
}

func (s *retryingStore) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, s.objs, key, r, size)
}

func (s *retryingStore) put(ctx context.Context, objs putter, key string, r io.Reader, size int64) error {
	if s.ops == 1 {
		return s.do(ctx, "put object "+key, func(ctx context.Context) error { return objs.PutObject(ctx, key, r, size) })
	}
	rr := &replayReader{r: r, max: s.p.MaxReplay}
	var last error
	return s.do(ctx, "put object "+key, func(ctx context.Context) error {
		body := io.Reader(rr)
		if last != nil {
			if rr.overflow {
				return final{fmt.Errorf("put object %s: not retried, the content is longer than the %d bytes kept to send it again: %w", key, s.p.MaxReplay, last)}
			}
			body = rr.again()
		}
		last = objs.PutObject(ctx, key, body, size)
		if last != nil && rr.err != nil && rr.err != io.EOF {
			return final{last} // the content's own reader failed: not transient
		}
		return last
	})
}

func (s *retryingStore) StatObject(ctx context.Context, key string) (ObjectInfo, error) {
	return s.stat(ctx, s.objs, key)
}

func (s *retryingStore) stat(ctx context.Context, objs putter, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := s.do(ctx, "stat object "+key, func(ctx context.Context) error {
		var err error
		info, err = objs.StatObject(ctx, key)
		return err
	})
	return info, err
}

// NewBatch forwards the wrapped store's batch (Batcher), its puts and stats
// retried as the store's are. Its Flush is not retried: a failed fsync, or an
// acknowledgement lost, leaves the batch's durability unknown, which only
// putting its objects again settles.
func (s *retryingStore) NewBatch() ObjectBatch {
	return &retryingBatch{s: s, b: NewObjectBatch(s.objs)}
}

type retryingBatch struct {
	s *retryingStore
	b ObjectBatch
}

func (rb *retryingBatch) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	return rb.s.put(ctx, rb.b, key, r, size)
}

func (rb *retryingBatch) StatObject(ctx context.Context, key string) (ObjectInfo, error) {
	return rb.s.stat(ctx, rb.b, key)
}

func (rb *retryingBatch) Flush(ctx context.Context) error { return rb.b.Flush(ctx) }

func (s *retryingStore) DeleteObject(ctx context.Context, key string) error {
	return s.do(ctx, "delete object "+key, func(ctx context.Context) error {
		return s.objs.DeleteObject(ctx, key)
	})
}

func (s *retryingStore) ListObjects(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	var last string
	return s.do(ctx, "list objects "+prefix, func(ctx context.Context) error {
		var fnErr error
		err := s.objs.ListObjects(ctx, prefix, func(info ObjectInfo) error {
			if last != "" && info.Key <= last {
				return nil // passed to fn by an earlier attempt
			}
			if fnErr = fn(info); fnErr != nil {
				return fnErr
			}
			last = info.Key
			return nil
		})
		if fnErr != nil {
			return final{fnErr} // fn's own error, returned as it is
		}
		return err
	})
}

// open opens key, retrying; with an attempt timeout, only the opening is
// bounded, the body stays readable until Close.
func (s *retryingStore) open(ctx context.Context, key string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	p := s.p
	p.AttemptTimeout = 0
	err := (&retryingStore{objs: s.objs, p: p, ops: s.ops}).do(ctx, "get object "+key, func(ctx context.Context) error {
		octx, cancel := context.WithCancel(ctx)
		var t *time.Timer
		if s.p.AttemptTimeout > 0 {
			t = time.AfterFunc(s.p.AttemptTimeout, cancel)
		}
		r, err := s.objs.GetObject(octx, key)
		if t != nil && !t.Stop() && err == nil {
			r.Close()
			err = fmt.Errorf("open took longer than %v: %w", s.p.AttemptTimeout, context.DeadlineExceeded)
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

func (s *retryingStore) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &resumingReader{ctx: ctx, s: s, key: key, rc: rc, sum: crc32.New(crc32.MakeTable(crc32.Castagnoli))}, nil
}

// resumingReader continues a body that failed part way from a new get.
type resumingReader struct {
	ctx     context.Context
	s       *retryingStore
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
		case r.ctx.Err() != nil || !r.s.p.Retryable(err) || r.resumes+1 >= r.s.p.Attempts:
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
	if err := SleepCtx(r.ctx, r.s.p.Wait); err != nil {
		return err
	}
	rc, err := r.s.open(r.ctx, r.key)
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

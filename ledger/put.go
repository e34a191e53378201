package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/syncledger/syncledger/ledger/driver"
)

// putReader is the reader a driver's put drains. It fails the read with the
// context's error once ctx is done, and with an error wrapping ErrInvalid as
// soon as the content is found to differ from the declared size (in place of
// io.EOF if it is short), so a driver whose SDK drains the reader itself
// cannot commit content of the wrong length. It remembers the first error, so
// that the put reports the content's own failure even where the driver's SDK
// loses or rewrites it.
type putReader struct {
	ctx  context.Context
	r    io.Reader
	size int64
	n    int64
	eof  bool
	err  error
	idle *idleTimer // restarted at each read (nil: none)
}

func newPutReader(ctx context.Context, r io.Reader, size int64) *putReader {
	return &putReader{ctx: ctx, r: r, size: size}
}

func (p *putReader) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.eof {
		return 0, io.EOF
	}
	if err := p.ctx.Err(); err != nil {
		p.err = err
		return 0, err
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.idle != nil {
		p.idle.restart()
	}
	switch {
	case p.size >= 0 && p.n > p.size:
		p.err = fmt.Errorf("content is longer than its declared size %d: %w", p.size, ErrInvalid)
		return n, p.err
	case err == io.EOF && p.size >= 0 && p.n != p.size:
		p.err = fmt.Errorf("content is %d bytes, size says %d: %w", p.n, p.size, ErrInvalid)
		return n, p.err
	case err == io.EOF:
		p.eof = true
	case err != nil:
		p.err = err
	}
	return n, err
}

// done checks the finished read: the first error if the read failed, an
// error if the reader was not read to EOF.
func (p *putReader) done() error {
	if p.err != nil {
		return p.err
	}
	if !p.eof {
		return errors.New("content not read to EOF")
	}
	return nil
}

// content is a put's content, read from the caller's reader, and what sends
// it again: a reader that can seek (a file, a bytes.Reader: what a host's
// commit puts) is sought back to where it began, whatever its length;
// another's bytes are kept as they are read, up to max.
type content struct {
	r        io.Reader
	seeker   io.Seeker // r, when it can seek
	start    int64     // where r began
	keep     bool      // keep the bytes read (r cannot seek)
	kept     bytes.Buffer
	max      int64
	overflow bool
	err      error // the caller's reader's error, final
}

func newContent(r io.Reader, max int64) *content {
	c := &content{r: r, max: max}
	if s, ok := r.(io.Seeker); ok {
		if off, err := s.Seek(0, io.SeekCurrent); err == nil {
			c.seeker, c.start = s, off
			return c
		}
	}
	c.keep = true
	return c
}

func (c *content) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if c.keep && !c.overflow {
		if int64(c.kept.Len()+n) > c.max {
			c.overflow = true
			c.kept = bytes.Buffer{}
		} else {
			c.kept.Write(p[:n])
		}
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// again returns a reader of the same content from its start — the caller's
// reader sought back, or the bytes kept and then the rest of it — or false
// if it cannot.
func (c *content) again() (io.Reader, bool) {
	switch {
	case c.seeker != nil:
		if _, err := c.seeker.Seek(c.start, io.SeekStart); err != nil {
			return nil, false
		}
		c.err = nil
		return c, true
	case c.overflow:
		return nil, false
	}
	return io.MultiReader(bytes.NewReader(bytes.Clone(c.kept.Bytes())), c), true
}

// failed reports whether the caller's reader failed (not at its end).
func (c *content) failed() bool { return c.err != nil && c.err != io.EOF }

// idleTimer ends a put's attempt once the store has read nothing of its
// content, and its driver reported no progress of sending it
// (driver.Progress), for the policy's AttemptTimeout (nil when it has none).
type idleTimer struct {
	t      *time.Timer
	d      time.Duration
	ended  atomic.Bool
	cancel context.CancelCauseFunc
}

// idle returns the attempt's context, ended by the idle timer when the
// policy has an AttemptTimeout.
func (b *Bucket) idle(ctx context.Context) (context.Context, *idleTimer) {
	if b.p.AttemptTimeout <= 0 {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	it := &idleTimer{d: b.p.AttemptTimeout, cancel: cancel}
	it.t = time.AfterFunc(it.d, func() {
		it.ended.Store(true)
		cancel(fmt.Errorf("no answer for %v, nor any of the content taken: %w", it.d, context.DeadlineExceeded))
	})
	// A driver that sends from a copy of the content reports its sending.
	return driver.WithProgress(ctx, it.restart), it
}

func (it *idleTimer) restart() {
	if !it.ended.Load() {
		it.t.Reset(it.d)
	}
}

func (it *idleTimer) fired() bool { return it != nil && it.ended.Load() }

// stop ends the attempt's timer and context.
func (it *idleTimer) stop() {
	if it != nil {
		it.t.Stop()
		it.cancel(nil)
	}
}

// putFunc is where a put goes: the driver, or a batch of it.
type putFunc func(ctx context.Context, key string, r io.Reader, size int64) error

// put stores r under key through to, retrying with the content sent again.
// With want set, each attempt verifies that the content hashes to *want: a
// mismatch fails the put with ErrChecksum, and a put the driver acknowledged
// without reading the content to its end is deleted and fails so too.
func (b *Bucket) put(ctx context.Context, to putFunc, key string, r io.Reader, size int64, want *Digest) error {
	var c *content // what sends the content again; none for one attempt
	if b.p.Attempts > 1 {
		c = newContent(r, b.p.MaxReplay)
	}
	var (
		last error
		pr   *putReader
		vr   *VerifyingReader
	)
	// Each attempt is bounded by AttemptTimeout since the store last took
	// some of the content (idle): a put of a large file on a slow link is
	// not cut while its bytes flow, a store that stops reading, or takes the
	// whole content and never answers, is.
	err := b.try(ctx, opPut, key, 0, func(ctx context.Context) error {
		actx, idle := b.idle(ctx)
		defer idle.stop()
		body := r
		if c != nil {
			body = c
		}
		if last != nil {
			again, ok := c.again()
			if !ok {
				return final{fmt.Errorf("not retried, the content (its reader cannot seek) is longer than the %d bytes kept to send it again: %w", b.p.MaxReplay, last)}
			}
			body = again
		}
		if want != nil {
			vr = NewVerifyingReader(body, *want)
			body = vr
		}
		pr = newPutReader(actx, body, size)
		pr.idle = idle
		last = to(actx, key, pr, size)
		switch {
		case last == nil:
			return nil
		case idle.fired():
			last = fmt.Errorf("%w (%v)", context.Cause(actx), last)
			return last
		case vr != nil && vr.Mismatch(), c != nil && c.failed(), pr.err != nil && ctx.Err() == nil:
			// The content's own failure, not the store's: it does not hash
			// to want, its reader failed, or its size is not the one given.
			return final{pr.err}
		}
		return last
	})
	if err != nil {
		return err
	}
	if want != nil && !vr.Verified() {
		// The driver stored without reading to EOF: we cannot vouch for it.
		_ = b.d.Delete(ctx, key)
		return fmt.Errorf("%s %q: content not fully read: %w", opPut, key, ErrChecksum)
	}
	if err := pr.done(); err != nil {
		return fmt.Errorf("%s %q: the store acknowledged it before reading it whole: %w", opPut, key, err)
	}
	return nil
}

// BlobRefreshAge is how old a stored blob may be for Put to take it as is. An
// older one is stored again, which makes it young: a commit that reuses content
// whose blob nothing references any more (a file set back to an old version)
// would otherwise rely on a blob that blob GC may be deleting, GC keeping
// unreferenced blobs only for its grace period. So GC's grace must exceed
// BlobRefreshAge plus the longest commit (the CLI requires 2 h).
const BlobRefreshAge = time.Hour

// Put stores the content read from r (size bytes; -1 if unknown) as the blob
// d, unless it is present: stored less than BlobRefreshAge ago, and holding
// content that hashes to d. A store's word that an object exists is not
// enough: whoever may put objects may have stored other bytes under a blob's
// key first (a squatter, knowing the digest of predictable content), and
// taking the key as stored would publish a commit no host can read. So
// presence is trusted only once the stored content reads back as d; content
// that does not is stored again (a backend that cannot overwrite,
// ledger/natsblob, stores a new version that readers prefer). A driver that
// prefers a put to an existence check for this size (driver.Bucket.PreferPut)
// is sent the content at once. If the content read does not hash to d the put
// fails with ErrChecksum and no blob is stored under d.
func (b *Bucket) Put(ctx context.Context, d Digest, r io.Reader, size int64) error {
	return b.putBlob(ctx, b.d.Put, b.d.Stat, d, r, size)
}

func (b *Bucket) putBlob(ctx context.Context, to putFunc, stat func(context.Context, string) (ObjectInfo, error), d Digest, r io.Reader, size int64) error {
	key := BlobKey(d)
	if err := b.live(ctx, opPut, key); err != nil {
		return fmt.Errorf("put blob %s: %w", d, err)
	}
	if !b.d.PreferPut(size) {
		var info ObjectInfo
		f := b.attempts(ctx, b.p.AttemptTimeout, func(ctx context.Context) error {
			var err error
			info, err = stat(ctx, key)
			return err
		})
		switch {
		case f.err == nil && (size < 0 || info.Size == size) && time.Since(info.ModTime) < BlobRefreshAge:
			err := b.readsAs(ctx, d)
			if err == nil {
				return nil // content-addressed: present, verified and young means done
			}
			if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("put blob %s: %w", d, err)
			}
		case f.err != nil && f.code != driver.NotFound:
			return fmt.Errorf("put blob %s: %w", d, fail(ctx, opStat, key, f.code, f.err, f.tries))
		}
		// Absent (most of a commit's new content: no error made), other
		// bytes, of another size, or old: stored.
	} // Else storing it again is cheaper than asking (and replaces other bytes).
	if err := b.put(ctx, to, key, r, size, &d); err != nil {
		return fmt.Errorf("put blob %s: %w", d, err)
	}
	return nil
}

// readsAs reads the stored blob d to its end: nil if its content hashes to d.
func (b *Bucket) readsAs(ctx context.Context, d Digest) error {
	rc, err := b.Get(ctx, d)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = Copy(io.Discard, rc)
	return err
}

// PutBytes stores b as a blob and returns its digest.
func PutBytes(ctx context.Context, s *Bucket, b []byte) (Digest, error) {
	d := DigestOf(b)
	return d, s.Put(ctx, d, bytes.NewReader(b), int64(len(b)))
}

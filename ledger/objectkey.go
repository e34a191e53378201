// The rules every object store backend (file, s3, gcs, natsblob) applies the
// same way, so that a key accepted by one backend is accepted by all of them and a
// put behaves the same everywhere: key syntax, and the reader a put drains
// (context-aware, counting, recording the caller's read error).

package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key (in bytes) any backend accepts: S3's and GCS's limit.
const MaxKeyLen = 1024

// ValidateKey reports whether key is a portable object key: 1 to MaxKeyLen bytes of
// UTF-8, slash-separated segments that are neither empty, "." nor "..", no leading or
// trailing slash, no backslash and no control characters. The error wraps
// ErrInvalid.
func ValidateKey(key string) error {
	if validKey(key) {
		return nil // every key a put or a stat names: no allocation, one pass
	}
	return explainKey(key)
}

// explainKey is ValidateKey's reference: rule by rule, the error naming the
// first one key breaks.
func explainKey(key string) error {
	if key == "" {
		return fmt.Errorf("object key is empty: %w", ErrInvalid)
	}
	if err := checkChars(key); err != nil {
		return fmt.Errorf("object key %q: %w", key, err)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("object key %q: %w", key, err)
		}
	}
	return nil
}

// ValidatePrefix reports whether prefix is a valid ListObjects prefix: empty, or a
// string that could begin a valid key. Every complete segment (one followed by a
// slash) obeys ValidateKey's rules; the last, partial segment may be anything made of
// valid characters, including empty (a prefix ending in "/"). The error wraps
// ErrInvalid.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkChars(prefix); err != nil {
		return fmt.Errorf("list prefix %q: %w", prefix, err)
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("list prefix %q: %w", prefix, err)
		}
	}
	return nil
}

// validKey reports in one pass, allocating nothing, whether explainKey
// accepts key (FuzzValidKey).
func validKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen {
		return false
	}
	ascii, seg := true, 0 // seg: where the current segment begins
	for i := 0; i <= len(key); i++ {
		if i == len(key) || key[i] == '/' {
			if s := key[seg:i]; s == "" || s == "." || s == ".." {
				return false
			}
			seg = i + 1
			continue
		}
		switch c := key[i]; {
		case c >= utf8.RuneSelf:
			ascii = false
		case c == '\\' || c < 0x20 || c == 0x7f:
			return false
		}
	}
	return ascii || utf8.ValidString(key)
}

func checkChars(s string) error {
	if len(s) > MaxKeyLen {
		return fmt.Errorf("longer than %d bytes: %w", MaxKeyLen, ErrInvalid)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8: %w", ErrInvalid)
	}
	for _, c := range s {
		switch {
		case c == '\\':
			return fmt.Errorf("contains a backslash: %w", ErrInvalid)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("contains control character %U: %w", c, ErrInvalid)
		}
	}
	return nil
}

func checkSegment(seg string) error {
	switch seg {
	case "":
		return fmt.Errorf("empty path segment (leading, trailing or double slash): %w", ErrInvalid)
	case ".", "..":
		return fmt.Errorf("path segment %q: %w", seg, ErrInvalid)
	}
	return nil
}

// PutReader wraps the reader a PutObject drains. It fails the read with the context's
// error once ctx is done, and with an error wrapping ErrInvalid as soon as the
// content is found to differ from the declared size (in place of io.EOF if it is
// short), so a backend whose SDK drains the reader itself cannot commit content of
// the wrong length. It counts the bytes read and remembers the first error, so a
// backend whose SDK loses or rewrites that error can still report it (Err) and the
// put's caller can test it with errors.Is.
type PutReader struct {
	ctx  context.Context
	r    io.Reader
	size int64
	n    int64
	eof  bool
	err  error
}

// NewPutReader wraps r, declared to hold size bytes (-1: unknown), for a put under
// ctx.
func NewPutReader(ctx context.Context, r io.Reader, size int64) *PutReader {
	return &PutReader{ctx: ctx, r: r, size: size}
}

func (p *PutReader) Read(b []byte) (int, error) {
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

// Size returns the declared size (-1: unknown).
func (p *PutReader) Size() int64 { return p.size }

// N returns the number of bytes read so far.
func (p *PutReader) N() int64 { return p.n }

// Err returns the first error (other than io.EOF) the read returned: the caller's
// reader's, the context's, or a size mismatch.
func (p *PutReader) Err() error { return p.err }

// Done checks the finished read: it returns Err if the read failed and an error if
// the reader was not read to EOF. A backend calls it before it makes the object
// visible.
func (p *PutReader) Done() error {
	if p.err != nil {
		return p.err
	}
	if !p.eof {
		return errors.New("content not read to EOF")
	}
	return nil
}

// CtxErr makes err report the context's error too when ctx is done, so callers can
// test a failure caused by cancellation with errors.Is(err, context.Canceled) even
// when an SDK returned its own error type.
func CtxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
)

// BlobPrefix is the key prefix under which content-addressed blobs live.
const BlobPrefix = "blobs/sha256/"

// BlobKey returns the object key of a blob: blobs/sha256/ab/<hex>.
func BlobKey(d Digest) string {
	h := d.String()
	return BlobPrefix + h[:2] + "/" + h
}

// BlobKeyDigest returns the digest a blob key names (the inverse of BlobKey);
// false for any other key.
func BlobKeyDigest(key string) (Digest, bool) {
	rest, ok := strings.CutPrefix(key, BlobPrefix)
	if !ok || len(rest) != 3+2*len(Digest{}) || rest[2] != '/' {
		return Digest{}, false
	}
	d, err := ParseDigest(rest[3:])
	if err != nil || rest[:2] != rest[3:5] {
		return Digest{}, false
	}
	return d, true
}

// Get opens the blob d. The reader verifies the content: a read that reaches
// the end of content not matching d fails with ErrChecksum instead of io.EOF,
// so a caller that reads to EOF never accepts wrong content. ErrNotFound if
// absent.
func (b *Bucket) Get(ctx context.Context, d Digest) (io.ReadCloser, error) {
	key := BlobKey(d)
	if err := b.live(ctx, opGet, key); err != nil {
		return nil, fmt.Errorf("get blob %s: %w", d, err)
	}
	rc, err := b.getResumed(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", d, err)
	}
	return &verifyingReadCloser{VerifyingReader: NewVerifyingReader(rc, d), c: rc}, nil
}

// Stat returns the blob's info; ErrNotFound if absent.
func (b *Bucket) Stat(ctx context.Context, d Digest) (ObjectInfo, error) {
	key := BlobKey(d)
	err := b.live(ctx, opStat, key)
	var info ObjectInfo
	if err == nil {
		info, err = b.stat(ctx, b.d.Stat, key)
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat blob %s: %w", d, err)
	}
	return info, nil
}

// Delete removes the blob; absent is not an error.
func (b *Bucket) Delete(ctx context.Context, d Digest) error {
	key := BlobKey(d)
	err := b.live(ctx, opDelete, key)
	if err == nil {
		err = b.delete(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("delete blob %s: %w", d, err)
	}
	return nil
}

// List calls fn for every stored blob with its digest, in digest order.
func (b *Bucket) List(ctx context.Context, fn func(Digest, ObjectInfo) error) error {
	return b.ListObjects(ctx, BlobPrefix, func(info ObjectInfo) error {
		rest := strings.TrimPrefix(info.Key, BlobPrefix)
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return nil // not a blob key
		}
		d, err := ParseDigest(rest[i+1:])
		if err != nil || rest[:i] != d.String()[:2] {
			return nil // foreign object under the prefix: not ours to report
		}
		return fn(d, info)
	})
}

// VerifyingReader passes content through while hashing it; at the end of the
// content it returns ErrChecksum instead of io.EOF when the hash does not match.
type VerifyingReader struct {
	r        io.Reader
	h        hash.Hash
	want     Digest
	verified bool
	mismatch bool
}

// NewVerifyingReader wraps r to verify that its content hashes to want.
func NewVerifyingReader(r io.Reader, want Digest) *VerifyingReader {
	return &VerifyingReader{r: r, h: sha256.New(), want: want}
}

func (v *VerifyingReader) Read(p []byte) (int, error) {
	if v.mismatch {
		return 0, ErrChecksum
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		var got Digest
		v.h.Sum(got[:0])
		if got != v.want {
			v.mismatch = true
			return n, fmt.Errorf("content hashes to %s, want %s: %w", got, v.want, ErrChecksum)
		}
		v.verified = true
	}
	return n, err
}

// Want returns the digest the content must hash to.
func (v *VerifyingReader) Want() Digest { return v.want }

// Verifies reports whether r is a VerifyingReader (or wraps one, as Bucket.Get's
// readers do) checking for want: a copy from it needs no hashing of
// its own, since its end is ErrChecksum unless the content hashed to want.
func Verifies(r io.Reader, want Digest) bool {
	v, ok := r.(interface{ Want() Digest })
	return ok && v.Want() == want
}

// Verified reports whether the content was read to its end and matched.
func (v *VerifyingReader) Verified() bool { return v.verified }

// Mismatch reports whether the content was read to its end and did not match.
func (v *VerifyingReader) Mismatch() bool { return v.mismatch }

type verifyingReadCloser struct {
	*VerifyingReader
	c io.Closer
}

func (v *verifyingReadCloser) Close() error { return v.c.Close() }

// copyBufs holds Copy's buffers: a bulk pass copies many small files, and a
// 32 KiB buffer allocated per file is most of its garbage.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Copy is io.Copy with a pooled buffer: an *os.File's ReadFrom and WriteTo
// allocate one per call when they cannot splice, as between regular files.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *bp)
}

// ReadBlob reads a whole blob, verified.
func ReadBlob(ctx context.Context, s *Bucket, d Digest) ([]byte, error) {
	rc, err := s.Get(ctx, d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, rc); err != nil {
		return nil, fmt.Errorf("read blob %s: %w", d, err)
	}
	return buf.Bytes(), nil
}

package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"time"
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

// NewBlobStore returns the content-addressed BlobStore over objs.
func NewBlobStore(objs ObjectStore) BlobStore { return &blobStore{objs: objs} }

type blobStore struct{ objs ObjectStore }

// BlobRefreshAge is how old a stored blob may be for Put to take it as is. An
// older one is stored again, which makes it young: a commit that reuses content
// whose blob nothing references any more (a file set back to an old version)
// would otherwise rely on a blob that blob GC may be deleting, GC keeping
// unreferenced blobs only for its grace period. So GC's grace must exceed
// BlobRefreshAge plus the longest commit (the CLI requires 2 h).
const BlobRefreshAge = time.Hour

// Put stores the blob unless it is present: stored less than BlobRefreshAge
// ago, and holding content that hashes to d. A store's word that an object
// exists is not enough: whoever may put objects may have stored other bytes
// under a blob's key first (a squatter, knowing the digest of predictable
// content), and taking the key as stored would publish a commit no host can
// read. So presence is trusted only once the stored content reads back as d;
// content that does not is stored again (a backend that cannot overwrite,
// ledger/natsblob, stores a new version that readers prefer).
func (s *blobStore) Put(ctx context.Context, d Digest, r io.Reader, size int64) error {
	return s.put(ctx, s.objs, d, r, size)
}

// Batch returns a batch of puts made durable together (BlobBatch).
func (s *blobStore) Batch() BlobBatch { return &blobBatch{s: s, objs: NewObjectBatch(s.objs)} }

// putter is where a put goes: the store, or a batch of it.
type putter interface {
	PutObject(ctx context.Context, key string, r io.Reader, size int64) error
	StatObject(ctx context.Context, key string) (ObjectInfo, error)
}

func (s *blobStore) put(ctx context.Context, objs putter, d Digest, r io.Reader, size int64) error {
	key := BlobKey(d)
	if PreferPut(s.objs, size) {
		// Storing it again is cheaper than asking (and replaces other bytes).
	} else if info, err := objs.StatObject(ctx, key); err == nil && (size < 0 || info.Size == size) && time.Since(info.ModTime) < BlobRefreshAge {
		err := s.readsAs(ctx, d)
		if err == nil {
			return nil // content-addressed: present, verified and young means done
		}
		if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("put blob %s: %w", d, err)
		}
	} else if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("put blob %s: %w", d, err)
	}
	vr := NewVerifyingReader(r, d)
	if err := objs.PutObject(ctx, key, vr, size); err != nil {
		if vr.Mismatch() {
			return fmt.Errorf("put blob %s: %w", d, ErrChecksum)
		}
		return fmt.Errorf("put blob %s: %w", d, err)
	}
	if !vr.Verified() {
		// The backend stored without reading to EOF: we cannot vouch for it.
		_ = s.objs.DeleteObject(ctx, key)
		return fmt.Errorf("put blob %s: content not fully read: %w", d, ErrChecksum)
	}
	return nil
}

// readsAs reads the stored blob d to its end: nil if its content hashes to d.
func (s *blobStore) readsAs(ctx context.Context, d Digest) error {
	rc, err := s.Get(ctx, d)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = Copy(io.Discard, rc)
	return err
}

func (s *blobStore) Get(ctx context.Context, d Digest) (io.ReadCloser, error) {
	rc, err := s.objs.GetObject(ctx, BlobKey(d))
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", d, err)
	}
	return &verifyingReadCloser{VerifyingReader: NewVerifyingReader(rc, d), c: rc}, nil
}

func (s *blobStore) Stat(ctx context.Context, d Digest) (ObjectInfo, error) {
	info, err := s.objs.StatObject(ctx, BlobKey(d))
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat blob %s: %w", d, err)
	}
	return info, nil
}

func (s *blobStore) Objects() ObjectStore { return s.objs }

func (s *blobStore) Delete(ctx context.Context, d Digest) error {
	if err := s.objs.DeleteObject(ctx, BlobKey(d)); err != nil {
		return fmt.Errorf("delete blob %s: %w", d, err)
	}
	return nil
}

func (s *blobStore) List(ctx context.Context, fn func(Digest, ObjectInfo) error) error {
	return s.objs.ListObjects(ctx, BlobPrefix, func(info ObjectInfo) error {
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

// Verifies reports whether r is a VerifyingReader (or wraps one, as BlobStore
// Get's readers do) checking for want: a copy from it needs no hashing of
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
func ReadBlob(ctx context.Context, s BlobStore, d Digest) ([]byte, error) {
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

// PutBytes stores b as a blob and returns its digest.
func PutBytes(ctx context.Context, s BlobStore, b []byte) (Digest, error) {
	d := DigestOf(b)
	return d, s.Put(ctx, d, bytes.NewReader(b), int64(len(b)))
}

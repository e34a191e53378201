package natsblob

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// Get implements driver.Bucket.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	m, _, err := s.pick(ctx, key)
	if err != nil {
		return nil, s.gone(ctx, err)
	}
	r, err := s.open(ctx, key, m)
	if err != nil {
		return nil, s.gone(ctx, err)
	}
	return r, nil
}

// open returns a reader of version m's chunks.
func (s *Store) open(ctx context.Context, key string, m meta) (*objectReader, error) {
	r := &objectReader{key: key, ctx: ctx, info: m.ObjectInfo, h: sha256.New(), cancel: func() {}}
	if m.Size == 0 {
		return r, nil
	}
	r.stream, r.subj = s.stream, s.chunkSubject(m.NUID)
	r.rctx = ctx
	if _, ok := ctx.Deadline(); !ok {
		r.rctx, r.cancel = context.WithTimeout(ctx, s.readTimeout)
	}
	return r, nil
}

// objectReader reads an object's chunks, in order, and checks its size and
// SHA-256 at the end. Each chunk is one get of the next message on the
// object's chunk subject (a direct get on a bucket that allows them, as New
// makes it): no consumer per object. A consumer per read (nats.go's object
// store, and this package before) hit the server's cap of 1,000 consumers per
// stream once a cold sync or a hydration read more than about 1,000 objects
// (issue 26 point 11).
type objectReader struct {
	key    string
	ctx    context.Context // the caller's, for its error
	rctx   context.Context // ctx, bounded by the store's read timeout if it has no deadline
	info   jetstream.ObjectInfo
	stream jetstream.Stream
	subj   string // the chunk subject
	next   uint64 // the stream seq the next chunk is at or after
	h      hash.Hash
	chunks uint32
	n      uint64
	buf    []byte
	done   bool
	cancel context.CancelFunc
}

func (r *objectReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if r.chunks == r.info.Chunks {
			r.done = true
			if r.n != r.info.Size || digestOf(r.h) != r.info.Digest {
				return 0, fmt.Errorf("read object %q: %d bytes, digest %s; stored as %d bytes, %s: %w",
					r.key, r.n, digestOf(r.h), r.info.Size, r.info.Digest, ledger.ErrChecksum)
			}
			return 0, io.EOF
		}
		// A request whose answer was lost (a dropped connection) ends at its
		// own timeout, a transient error the retrying store resumes after.
		gctx, cancel := context.WithTimeout(r.rctx, chunkTimeout)
		m, err := r.stream.GetMsg(gctx, max(r.next, 1), jetstream.WithGetMsgSubject(r.subj))
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Fewer chunks than the metadata says: purged, or never all stored.
			return 0, fmt.Errorf("read object %q: chunk %d of %d is missing: %w", r.key, r.chunks+1, r.info.Chunks, ledger.ErrChecksum)
		}
		if err != nil {
			return 0, fmt.Errorf("read object %q: %w", r.key, err)
		}
		if m.Subject != r.subj || m.Sequence < r.next {
			return 0, fmt.Errorf("read object %q: asked for the next chunk from seq %d, got seq %d on %s: %w", r.key, r.next, m.Sequence, m.Subject, ledger.ErrInvalid)
		}
		r.next = m.Sequence + 1
		r.buf = m.Data
		r.chunks++
		r.n += uint64(len(r.buf))
		r.h.Write(r.buf)
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *objectReader) Close() error {
	r.cancel()
	return nil
}

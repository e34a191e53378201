package natsblob

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

func digestOf(h hash.Hash) string {
	return "SHA-256=" + base64.URLEncoding.EncodeToString(h.Sum(nil))
}

// Put implements driver.Bucket (see the package doc).
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return full(s.gone(ctx, s.put(ctx, key, r, size, s.publishMeta)))
}

// publisher stores an object's metadata message, which makes it visible:
// Store.publishMeta, or a batch's, which leaves the acknowledgement to Flush.
type publisher func(ctx context.Context, key string, info *jetstream.ObjectInfo) error

func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, pub publisher) error {
	old, none, err := s.pick(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) || err == nil && none {
		// Absent, or every stored version lies: a new version, which readers
		// take as the first that holds what it records (pick).
		return s.upload(ctx, key, r, size, pub)
	}
	if err != nil {
		return err
	}
	// The key is stored. Read the content aside: the same content only
	// refreshes the object's time; other content replaces it, which needs
	// the old version purged first (the admin's right).
	spool, err := os.CreateTemp("", "syncledger-natsblob-*")
	if err != nil {
		return err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(spool, h), r)
	if err != nil {
		return err
	}
	if digestOf(h) == old.Digest && uint64(n) == old.Size {
		// The same content, by the metadata's word: the stored chunks must say
		// so too, else this is a squatted key and the content a new version.
		ok, err := s.holds(ctx, key, old)
		if err != nil {
			return err
		}
		if ok {
			refresh := old.ObjectInfo
			return pub(ctx, key, &refresh)
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return s.upload(ctx, key, spool, n, pub)
	}
	if want, ok := wantDigest(key); !ok || old.Digest == want {
		// Other content in place of what the key holds: only by purging it
		// first (the admin's right). A blob key whose stored version records
		// other content than the key names holds nothing yet: a new version.
		if err := s.purge(ctx, key, old); err != nil {
			return fmt.Errorf("replace the stored version: %w", err)
		}
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return s.upload(ctx, key, spool, n, pub)
}

// upload sends r's content (size bytes; -1: unknown) as chunks on a new
// subject, then its metadata. Nothing is visible until the metadata is
// stored, after r's io.EOF; a failed upload leaves its chunks behind,
// unreferenced.
func (s *Store) upload(ctx context.Context, key string, r io.Reader, size int64, pub publisher) error {
	id := nuid.Next()
	subj := s.chunkSubject(id)
	h := sha256.New()
	buf := make([]byte, chunkBuf(size))
	var (
		acks  []jetstream.PubAckFuture
		total uint64
	)
	wait := func() error {
		for _, a := range acks {
			select {
			case <-a.Ok():
				driver.Progress(ctx)
			case err := <-a.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		acks = acks[:0]
		return nil
	}
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			total += uint64(n)
			// The message owns its data until acknowledged.
			a, err := s.js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: slices.Clone(buf[:n])})
			if err != nil {
				return err
			}
			acks = append(acks, a)
			if len(acks) >= 64 {
				if err := wait(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := wait(); err != nil {
		return err
	}
	info := &jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: key, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     s.bucket, NUID: id, Size: total, Chunks: uint32((total + chunkSize - 1) / chunkSize), Digest: digestOf(h),
	}
	return pub(ctx, key, info)
}

// chunkBuf is the read buffer of an upload of size bytes (-1: unknown): a
// chunk, or the object and one byte more (to see its end in one read) when
// it is smaller: a blob of a few hundred bytes does not allocate 128 KiB.
func chunkBuf(size int64) int {
	if size >= 0 && size < chunkSize {
		return int(size) + 1
	}
	return chunkSize
}

// publishMeta stores info as a metadata message of key: never a roll-up.
func (s *Store) publishMeta(ctx context.Context, key string, info *jetstream.ObjectInfo) error {
	m, err := s.metaMsg(key, info)
	if err != nil {
		return err
	}
	_, err = s.js.PublishMsg(ctx, m)
	return err
}

// metaMsg is info's metadata message of key, stamped now.
func (s *Store) metaMsg(key string, info *jetstream.ObjectInfo) (*nats.Msg, error) {
	info.ModTime = time.Now().UTC()
	b, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: s.metaSubject(key), Data: b}, nil
}

// purge removes every version of key: its metadata subject and the chunks of
// its versions (a purge: needs the admin role).
func (s *Store) purge(ctx context.Context, key string, first meta) error {
	ids := []string{first.NUID}
	if m, err := s.stream.GetLastMsgForSubject(ctx, s.metaSubject(key)); err == nil {
		var last jetstream.ObjectInfo
		if json.Unmarshal(m.Data, &last) == nil && last.NUID != first.NUID && validID(last.NUID) {
			ids = append(ids, last.NUID)
		}
	}
	// The metadata goes first: a key is absent from then on, whatever the
	// chunk purges do.
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.metaSubject(key))); err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.chunkSubject(id))); err != nil {
			return err
		}
	}
	return nil
}

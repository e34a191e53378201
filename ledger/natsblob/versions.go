package natsblob

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// meta is an object's metadata as the object store writes it, with where and
// when it was stored.
type meta struct {
	jetstream.ObjectInfo
	seq uint64
}

// wantDigest returns the digest a blob key's content must have, as metadata
// records it; false for a key that does not name its content.
func wantDigest(key string) (string, bool) {
	d, ok := ledger.BlobKeyDigest(key)
	if !ok {
		return "", false
	}
	return "SHA-256=" + base64.URLEncoding.EncodeToString(d[:]), true
}

// version decodes a metadata message of key: ok when it names key and a valid
// chunk subject and does not mark the object deleted.
func version(key string, data []byte) (jetstream.ObjectInfo, bool) {
	var oi jetstream.ObjectInfo
	if json.Unmarshal(data, &oi) != nil || oi.Deleted || oi.Name != key || !validID(oi.NUID) {
		return oi, false
	}
	return oi, true
}

// versions returns the object's versions in the order stored: the metadata
// messages version accepts, the first of each chunk subject; at most limit (0:
// all).
func (s *Store) versions(ctx context.Context, key string, limit int) ([]meta, error) {
	subj := s.metaSubject(key)
	var out []meta
	for seq := uint64(1); limit == 0 || len(out) < limit; {
		m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if oi, ok := version(key, m.Data); ok && !slices.ContainsFunc(out, func(v meta) bool { return v.NUID == oi.NUID }) {
			oi.ModTime = m.Time
			out = append(out, meta{ObjectInfo: oi, seq: m.Sequence})
		}
		seq = m.Sequence + 1
	}
	return out, nil
}

// first returns the object's first version (see versions).
func (s *Store) first(ctx context.Context, key string) (meta, error) {
	vs, err := s.versions(ctx, key, 1)
	if err != nil {
		return meta{}, err
	}
	if len(vs) == 0 {
		return meta{}, ledger.ErrNotFound
	}
	return vs[0], nil
}

// pick returns the version of key readers read: its first version, unless
// the key has others (a later message that is neither that version nor a copy
// of it). Only a race of two first puts, or a user who may put storing
// metadata that lies — chunks that do not hold what it records, stored under
// a key before the content's honest put (a squatter) — makes others; then
// pick reads each version's chunks in full and takes the first that holds
// what it records (if none does, the first, and none is set: reading it
// fails with ledger.ErrChecksum). Versions stored after one that holds never
// change what the key reads as.
func (s *Store) pick(ctx context.Context, key string) (m meta, none bool, err error) {
	m, err = s.first(ctx, key)
	if err != nil {
		return meta{}, false, err
	}
	last, err := s.stream.GetLastMsgForSubject(ctx, s.metaSubject(key))
	if err != nil {
		return meta{}, false, err
	}
	if oi, ok := version(key, last.Data); last.Sequence == m.seq || ok && oi.NUID == m.NUID && oi.Digest == m.Digest && oi.Size == m.Size {
		return m, false, nil
	}
	vs, err := s.versions(ctx, key, 0)
	if err != nil || len(vs) == 1 {
		return m, false, err
	}
	for _, v := range vs {
		ok, err := s.holds(ctx, key, v)
		if err != nil {
			return meta{}, false, err
		}
		if ok {
			return v, false, nil
		}
	}
	return m, true, nil
}

// holds reads version v's chunks in full: true if they hold what v records,
// and v records what the key names if it names its content (a blob key).
func (s *Store) holds(ctx context.Context, key string, v meta) (bool, error) {
	if want, ok := wantDigest(key); ok && v.Digest != want {
		return false, nil
	}
	r, err := s.open(ctx, key, v)
	if errors.Is(err, ledger.ErrChecksum) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	if errors.Is(err, ledger.ErrChecksum) {
		return false, nil
	}
	return err == nil, err
}

// modTime is when the object was last stored: the time of the last metadata
// message if it is a copy of the first (a put of the same content again), else
// the first's.
func (s *Store) modTime(ctx context.Context, key string, first meta) (time.Time, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.metaSubject(key))
	if err != nil {
		return time.Time{}, err
	}
	var last jetstream.ObjectInfo
	if m.Sequence != first.seq && json.Unmarshal(m.Data, &last) == nil && last.Name == key && !last.Deleted &&
		last.NUID == first.NUID && last.Digest == first.Digest && last.Size == first.Size {
		return m.Time, nil
	}
	return first.ModTime, nil
}

package natsobj

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
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/syncledger/syncledger/internal/backend"
	"github.com/syncledger/syncledger/ledger"
)

// DefaultReadTimeout bounds a GetObject's whole read when neither the caller's
// context nor Config.ReadTimeout sets one.
const DefaultReadTimeout = 10 * time.Minute

// chunkSize is the size of the chunks an object is sent in (the object store's
// default).
const chunkSize = 128 << 10

// chunkTimeout bounds the request for one chunk (nats.go's default API timeout).
const chunkTimeout = 5 * time.Second

// Config configures a Store.
type Config struct {
	// Conn is the NATS connection (required). It stays the caller's to close.
	Conn *nats.Conn
	// Bucket is the object store bucket's name (required): letters, digits, "-"
	// and "_".
	Bucket string
	// Replicas is the number of replicas a bucket New creates gets (1 to 5; 0
	// means 1). An existing bucket is used as it is.
	Replicas int
	// ReadTimeout bounds the whole read of a GetObject whose context has no
	// deadline. 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
}

// Store is a ledger.ObjectStore on a JetStream object store bucket. It is safe for
// concurrent use.
type Store struct {
	js          jetstream.JetStream
	stream      jetstream.Stream
	bucket      string
	readTimeout time.Duration
}

var _ ledger.ObjectStore = (*Store)(nil)

// StreamName returns the name of the stream behind bucket.
func StreamName(bucket string) string { return "OBJ_" + bucket }

// StreamConfig is the configuration of the stream New creates for bucket: the
// object store's layout (chunks on $O.<bucket>.C.<nuid>, metadata on
// $O.<bucket>.M.<name>), without roll-ups and message deletes, so that a user
// allowed to put objects cannot erase a stored one by publishing (see the
// package doc).
func StreamConfig(bucket string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamName(bucket),
		Description: "syncledger objects (write once: no roll-ups, no message deletes)",
		Subjects:    []string{"$O." + bucket + ".C.>", "$O." + bucket + ".M.>"},
		MaxBytes:    -1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		Discard:     jetstream.DiscardNew,
		AllowRollup: false,
		DenyDelete:  true,
		AllowDirect: true,
	}
}

// New validates cfg and opens the bucket, creating it if it does not exist.
func New(ctx context.Context, cfg Config) (*Store, error) {
	switch {
	case cfg.Conn == nil:
		return nil, fmt.Errorf("new nats object store: Config.Conn is nil: %w", ledger.ErrInvalid)
	case !ledger.IsToken(cfg.Bucket, 0):
		return nil, fmt.Errorf("new nats object store: bucket name %q: want letters, digits, '-' and '_': %w", cfg.Bucket, ledger.ErrInvalid)
	case cfg.Replicas < 0 || cfg.Replicas > 5:
		return nil, fmt.Errorf("new nats object store: Config.Replicas %d: want 1 to 5: %w", cfg.Replicas, ledger.ErrInvalid)
	case cfg.ReadTimeout < 0:
		return nil, fmt.Errorf("new nats object store: negative Config.ReadTimeout: %w", ledger.ErrInvalid)
	}
	js, err := jetstream.New(cfg.Conn, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("new nats object store: %w", err)
	}
	st, err := js.Stream(ctx, StreamName(cfg.Bucket))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, StreamConfig(cfg.Bucket, cfg.Replicas))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, StreamName(cfg.Bucket)) // created concurrently
		}
	}
	if err != nil {
		return nil, fmt.Errorf("new nats object store: open bucket %q: %w", cfg.Bucket, backend.CtxErr(ctx, err))
	}
	s := &Store{js: js, stream: st, bucket: cfg.Bucket, readTimeout: cfg.ReadTimeout}
	if s.readTimeout == 0 {
		s.readTimeout = DefaultReadTimeout
	}
	return s, nil
}

// Harden turns off roll-ups and message deletes on a bucket created without
// New's settings (by nats.go's object store, or by an older syncledger) and
// reports whether it changed anything. It needs the right to update the stream
// (the admin role).
func (s *Store) Harden(ctx context.Context) (bool, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("harden bucket %q: %w", s.bucket, err)
	}
	c := info.Config
	if !c.AllowRollup && c.DenyDelete {
		return false, nil
	}
	c.AllowRollup, c.DenyDelete = false, true
	if _, err := s.js.UpdateStream(ctx, c); err != nil {
		return false, fmt.Errorf("harden bucket %q: %w", s.bucket, err)
	}
	return true, nil
}

// validID reports whether id can be a chunk subject's last token: never a
// wildcard or several tokens, whoever wrote the metadata.
func validID(id string) bool { return ledger.IsToken(id, 0) }

func (s *Store) metaSubject(key string) string {
	return "$O." + s.bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(key))
}

func (s *Store) chunkSubject(id string) string { return "$O." + s.bucket + ".C." + id }

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
			return nil, backend.CtxErr(ctx, err)
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
		return meta{}, false, backend.CtxErr(ctx, err)
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
		return time.Time{}, backend.CtxErr(ctx, err)
	}
	var last jetstream.ObjectInfo
	if m.Sequence != first.seq && json.Unmarshal(m.Data, &last) == nil && last.Name == key && !last.Deleted &&
		last.NUID == first.NUID && last.Digest == first.Digest && last.Size == first.Size {
		return m.Time, nil
	}
	return first.ModTime, nil
}

func mapErr(ctx context.Context, err error) error {
	if errors.Is(err, ledger.ErrNotFound) {
		return err
	}
	return backend.CtxErr(ctx, err)
}

func digestOf(h hash.Hash) string {
	return "SHA-256=" + base64.URLEncoding.EncodeToString(h.Sum(nil))
}

// PutObject implements ledger.ObjectStore (see the package doc).
func (s *Store) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	if err := s.put(ctx, key, backend.NewPutReader(ctx, r, size)); err != nil {
		return fmt.Errorf("put object %q: %w", key, backend.CtxErr(ctx, err))
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, pr *backend.PutReader) error {
	old, none, err := s.pick(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) || err == nil && none {
		// Absent, or every stored version lies: a new version, which readers
		// take as the first that holds what it records (pick).
		return s.upload(ctx, key, pr)
	}
	if err != nil {
		return err
	}
	// The key is stored. Read the content aside: the same content only
	// refreshes the object's time; other content replaces it, which needs
	// the old version purged first (the admin's right).
	spool, err := os.CreateTemp("", "syncledger-natsobj-*")
	if err != nil {
		return err
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(spool, h), pr)
	if err == nil {
		err = pr.Done()
	}
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
			return s.publishMeta(ctx, key, &refresh)
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return s.upload(ctx, key, backend.NewPutReader(ctx, spool, n))
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
	return s.upload(ctx, key, backend.NewPutReader(ctx, spool, n))
}

// upload sends pr's content as chunks on a new subject, then its metadata.
// Nothing is visible until the metadata is stored; a failed upload leaves its
// chunks behind, unreferenced.
func (s *Store) upload(ctx context.Context, key string, pr *backend.PutReader) error {
	id := nuid.Next()
	subj := s.chunkSubject(id)
	h := sha256.New()
	buf := make([]byte, chunkSize)
	var (
		acks  []jetstream.PubAckFuture
		total uint64
	)
	wait := func() error {
		for _, a := range acks {
			select {
			case <-a.Ok():
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
		n, rerr := io.ReadFull(pr, buf)
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
	if err := pr.Done(); err != nil {
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	info := &jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: key, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     s.bucket, NUID: id, Size: total, Chunks: uint32((total + chunkSize - 1) / chunkSize), Digest: digestOf(h),
	}
	return s.publishMeta(ctx, key, info)
}

// publishMeta stores info as a metadata message of key: never a roll-up.
func (s *Store) publishMeta(ctx context.Context, key string, info *jetstream.ObjectInfo) error {
	info.ModTime = time.Now().UTC()
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	_, err = s.js.PublishMsg(ctx, &nats.Msg{Subject: s.metaSubject(key), Data: b})
	return err
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

// GetObject implements ledger.ObjectStore.
func (s *Store) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	m, _, err := s.pick(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, mapErr(ctx, err))
	}
	r, err := s.open(ctx, key, m)
	if err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
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
			return 0, fmt.Errorf("read object %q: %w", r.key, backend.CtxErr(r.ctx, err))
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

// StatObject implements ledger.ObjectStore.
func (s *Store) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := backend.ValidateKey(key); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	m, _, err := s.pick(ctx, key)
	var mt time.Time
	if err == nil {
		mt, err = s.modTime(ctx, key, m)
	}
	if err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, mapErr(ctx, err))
	}
	return ledger.ObjectInfo{Key: key, Size: int64(m.Size), ModTime: mt}, nil
}

// DeleteObject implements ledger.ObjectStore. It purges the object's subjects,
// which needs the admin role.
func (s *Store) DeleteObject(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	m, err := s.first(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err == nil {
		err = s.purge(ctx, key, m)
	}
	if err != nil {
		return fmt.Errorf("delete object %q: %w", key, mapErr(ctx, err))
	}
	return nil
}

// ListObjects implements ledger.ObjectStore. The bucket's metadata is read in
// full (the first message of each object, as GetObject reads it), filtered and
// sorted before fn is called. fn's error is returned as is.
func (s *Store) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	if err := backend.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	infos, err := s.list(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, backend.CtxErr(ctx, err))
	}
	for _, info := range infos {
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) list(ctx context.Context, prefix string) ([]ledger.ObjectInfo, error) {
	cons, err := s.js.OrderedConsumer(ctx, StreamName(s.bucket), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"$O." + s.bucket + ".M.>"},
	})
	if err != nil {
		return nil, err
	}
	type entry struct {
		first jetstream.ObjectInfo
		mod   time.Time
	}
	objs := map[string]*entry{}
	for pending := uint64(1); pending > 0; {
		batch, err := cons.FetchNoWait(1024)
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			pending = md.NumPending
			var oi jetstream.ObjectInfo
			if json.Unmarshal(m.Data(), &oi) != nil || oi.Deleted || !validID(oi.NUID) || m.Subject() != s.metaSubject(oi.Name) {
				continue
			}
			if e, ok := objs[oi.Name]; !ok {
				objs[oi.Name] = &entry{first: oi, mod: md.Timestamp}
			} else if oi.NUID == e.first.NUID && oi.Digest == e.first.Digest && oi.Size == e.first.Size {
				e.mod = md.Timestamp
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		if got == 0 {
			break // nothing more now
		}
	}
	var infos []ledger.ObjectInfo
	for name, e := range objs {
		if !strings.HasPrefix(name, prefix) || backend.ValidateKey(name) != nil {
			continue
		}
		infos = append(infos, ledger.ObjectInfo{Key: name, Size: int64(e.first.Size), ModTime: e.mod})
	}
	slices.SortFunc(infos, func(a, b ledger.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Protection reports whether the bucket keeps stored objects from being altered
// or erased by users who may only put (see the package doc): its stream must
// refuse roll-ups and message deletes.
func (s *Store) Protection(ctx context.Context) (protected bool, how string, err error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return false, "", fmt.Errorf("read the settings of bucket %q: %w", s.bucket, err)
	}
	if !info.Config.AllowRollup && info.Config.DenyDelete {
		return true, "written once (no roll-ups, no message deletes)", nil
	}
	return false, "bucket " + s.bucket + " allows roll-ups or message deletes", nil
}

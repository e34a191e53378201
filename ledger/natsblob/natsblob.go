package natsblob

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs/directget"
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
	// NoCreate opens an existing bucket only: a missing one is an error
	// wrapping ledger.ErrNotFound, and no create request is sent (a user
	// below the admin may not create streams).
	NoCreate bool
	// ReadTimeout bounds the whole read of a GetObject whose context has no
	// deadline. 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
}

// Store is the driver.Bucket on a JetStream object store bucket. It is safe for
// concurrent use.
type Store struct {
	js          jetstream.JetStream
	stream      jetstream.Stream
	bucket      string
	readTimeout time.Duration
}

var _ driver.Bucket = (*Store)(nil)

// StreamName returns the name of the stream behind bucket.
func StreamName(bucket string) string { return "OBJ_" + bucket }

// ChunkSubjects is the subject filter of a bucket's chunks ($O.<bucket>.C.>).
func ChunkSubjects(bucket string) string { return "$O." + bucket + ".C.>" }

// MetaSubjects is the subject filter of a bucket's metadata ($O.<bucket>.M.>).
func MetaSubjects(bucket string) string { return "$O." + bucket + ".M.>" }

// StreamConfig is the configuration of the stream New creates for bucket: the
// object store's layout (chunks on $O.<bucket>.C.<nuid>, metadata on
// $O.<bucket>.M.<name>), without roll-ups and message deletes, so that a user
// allowed to put objects cannot erase a stored one by publishing (see the
// package doc).
func StreamConfig(bucket string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamName(bucket),
		Description: "syncledger objects (write once: no roll-ups, no message deletes)",
		Subjects:    []string{ChunkSubjects(bucket), MetaSubjects(bucket)},
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
	if errors.Is(err, jetstream.ErrStreamNotFound) && cfg.NoCreate {
		return nil, fmt.Errorf("new nats object store: bucket %q: %w", cfg.Bucket, ledger.ErrNotFound)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, StreamConfig(cfg.Bucket, cfg.Replicas))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, StreamName(cfg.Bucket)) // created concurrently
		}
	}
	if err != nil {
		return nil, fmt.Errorf("new nats object store: open bucket %q: %w", cfg.Bucket, err)
	}
	s := &Store{js: js, stream: st, bucket: cfg.Bucket, readTimeout: cfg.ReadTimeout}
	if s.readTimeout == 0 {
		s.readTimeout = DefaultReadTimeout
	}
	return s, nil
}

// Configured returns the configuration of the bucket's stream as New read it
// (no request): the NATS adapter checks it (natsjs.Client.ObjectStore).
func (s *Store) Configured() jetstream.StreamConfig { return s.stream.CachedInfo().Config }

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

// ErrorCode implements driver.Bucket: a stream not found is a bucket that
// does not exist (see gone); a permission violation a refusal.
func (s *Store) ErrorCode(err error) driver.ErrorCode {
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return driver.NotFound
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return driver.NoBucket
	case errors.Is(err, nats.ErrPermissionViolation):
		return driver.PermissionDenied
	case errors.Is(err, errFlushed):
		return driver.Invalid
	}
	return driver.Unknown
}

// gone tells a bucket that does not exist from a server that does not
// answer: a request no stream answered (nats.ErrNoResponders: a direct get of
// a stream that is gone, or whose servers are all down; a chunk published
// where no stream listens) is followed by one question to the JetStream API,
// whose answer says whether the bucket's stream exists. A stream not found
// makes err wrap jetstream.ErrStreamNotFound (driver.NoBucket); anything else
// leaves err as it is, transient.
func (s *Store) gone(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
		return err
	}
	if _, serr := s.js.Stream(ctx, StreamName(s.bucket)); errors.Is(serr, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bucket %q: %w (%w)", s.bucket, serr, err)
	}
	return err
}

// PreferPut implements driver.Bucket: a put of a stored key reads its chunks
// back (see put), which costs more than asking.
func (s *Store) PreferPut(int64) bool { return false }

// Close implements driver.Bucket: the connection stays the caller's.
func (s *Store) Close() error { return nil }

// Stat implements driver.Bucket.
func (s *Store) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	m, _, err := s.pick(ctx, key)
	if err != nil {
		return driver.ObjectInfo{}, s.gone(ctx, err)
	}
	mt, err := s.modTime(ctx, key, m)
	if err != nil {
		return driver.ObjectInfo{}, s.gone(ctx, err)
	}
	return driver.ObjectInfo{Key: key, Size: int64(m.Size), ModTime: mt}, nil
}

// Delete implements driver.Bucket. It purges the object's subjects, which
// needs the admin role.
func (s *Store) Delete(ctx context.Context, key string) error {
	m, err := s.first(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err == nil {
		err = s.purge(ctx, key, m)
	}
	return s.gone(ctx, err)
}

// List implements driver.Bucket. The bucket's metadata is read in full (the
// first message of each object, as Get reads it), filtered and sorted before
// fn is called. fn's error is returned as is.
func (s *Store) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	infos, err := s.list(ctx, prefix)
	if err != nil {
		return s.gone(ctx, err)
	}
	for _, info := range infos {
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) list(ctx context.Context, prefix string) ([]driver.ObjectInfo, error) {
	// Every metadata message, in the order stored, by batched direct gets
	// (leader gets on a bucket that does not allow direct gets): no
	// consumer, so no listing holds state on the server (issue 38).
	info := s.stream.CachedInfo()
	dg := directget.Stream{Conn: s.js.Conn(), Name: StreamName(s.bucket), Timeout: chunkTimeout, Leader: !info.Config.AllowDirect}
	type entry struct {
		first jetstream.ObjectInfo
		mod   time.Time
	}
	objs := map[string]*entry{}
	err := dg.Scan(ctx, MetaSubjects(s.bucket), 1, func(m directget.Msg) error {
		var oi jetstream.ObjectInfo
		if json.Unmarshal(m.Data, &oi) != nil || oi.Deleted || !validID(oi.NUID) || m.Subject != s.metaSubject(oi.Name) {
			return nil
		}
		if e, ok := objs[oi.Name]; !ok {
			objs[oi.Name] = &entry{first: oi, mod: m.Time}
		} else if oi.NUID == e.first.NUID && oi.Digest == e.first.Digest && oi.Size == e.first.Size {
			e.mod = m.Time
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var infos []driver.ObjectInfo
	for name, e := range objs {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		infos = append(infos, driver.ObjectInfo{Key: name, Size: int64(e.first.Size), ModTime: e.mod})
	}
	slices.SortFunc(infos, func(a, b driver.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
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

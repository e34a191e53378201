package natsjs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/directget"
)

// openKVBucket opens a ledger's side bucket (heartbeats, swamp locks, swamp's
// control plane). The admin creates it with the ledger (expect.go kvBucket,
// Ledger.Upgrade): a missing bucket is a *ledger.ConfigError naming the
// upgrade, and so is one whose settings differ from what syncledger creates.
// A ledger that does not exist is an error wrapping ledger.ErrNotFound.
func openKVBucket(ctx context.Context, js jetstream.JetStream, ledgerName, bucket string) (jetstream.KeyValue, error) {
	kv, err := openKV(ctx, js, ledgerName, bucket)
	return kv, unreachable(js.Conn(), err)
}

func openKV(ctx context.Context, js jetstream.JetStream, ledgerName, bucket string) (jetstream.KeyValue, error) {
	// The bucket's stream info, as nats.go reads it to open the bucket, is
	// the configuration checked: no request of its own.
	seen := &seenInfo{subjects: []string{apiPrefix + "STREAM.INFO." + KVStream(bucket)}}
	js, err := jetstream.New(js.Conn(), jetstream.WithDefaultTimeout(js.Options().DefaultTimeout),
		jetstream.WithClientTrace(&jetstream.ClientTrace{ResponseReceived: seen.received}))
	if err != nil {
		return nil, err
	}
	r := kvBucket(ledgerName, bucket)
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err := js.Stream(ctx, ledger.StreamName(ledgerName)); errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("ledger %q: %w", ledgerName, ledger.ErrNotFound)
		}
		return nil, r.missing()
	}
	if errors.Is(err, jetstream.ErrBadBucket) {
		st, err := js.Stream(ctx, KVStream(bucket))
		if err != nil {
			return nil, err
		}
		return nil, r.checkConfig(st.CachedInfo().Config)
	}
	if err != nil {
		return nil, err
	}
	st, err := seen.settings(ctx, js, KVStream(bucket))
	if err != nil {
		return nil, err
	}
	if err := r.check(st); err != nil {
		return nil, err
	}
	return kv, nil
}

// seenInfo keeps the last answer to a stream info or create request of its
// subjects that a JetStream context made (jetstream.ClientTrace).
type seenInfo struct {
	subjects []string
	mu       sync.Mutex
	data     []byte
}

func (s *seenInfo) received(subj string, payload []byte, _ nats.Header) {
	if slices.Contains(s.subjects, subj) {
		s.mu.Lock()
		s.data = slices.Clone(payload)
		s.mu.Unlock()
	}
}

// settings returns the settings of the last answer seen, or asks for them if
// none was (a nats.go that reads them otherwise).
func (s *seenInfo) settings(ctx context.Context, js jetstream.JetStream, stream string) (*streamSettings, error) {
	s.mu.Lock()
	data := s.data
	s.mu.Unlock()
	var info struct {
		Config *streamSettings `json:"config"`
	}
	if data != nil && json.Unmarshal(data, &info) == nil && info.Config != nil {
		return info.Config, nil
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return settingsOf(st.CachedInfo().Config)
}

// KV is the ledger.KV port on a JetStream key-value bucket. It maps the
// bucket's errors to the port's: a missing or deleted key is ledger.ErrNotFound,
// a failed revision check (nats.go's ErrKeyExists, the server's "wrong last
// sequence") is ledger.ErrConflict.
type KV struct {
	nc      *nats.Conn
	kv      jetstream.KeyValue
	timeout time.Duration // per request of List (0: directget's default)
}

var _ ledger.KV = (*KV)(nil)

// newKV returns the port on kv, whose requests go through nc: an operation
// that could not reach the server (see ledger.ErrUnreachable) says so.
func newKV(nc *nats.Conn, kv jetstream.KeyValue, timeout time.Duration) *KV {
	return &KV{nc: nc, kv: kv, timeout: timeout}
}

func (k *KV) mapErr(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return fmt.Errorf("%s %s: %w", op, key, ledger.ErrNotFound)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%s %s: %w", op, key, ledger.ErrConflict)
	}
	if code, ok := apiCode(err); ok && code == jetstream.JSErrCodeStreamWrongLastSequence {
		return fmt.Errorf("%s %s: %w", op, key, ledger.ErrConflict)
	}
	if full := ServerFull(err); full != nil {
		return fmt.Errorf("%s %s: %w", op, key, full)
	}
	return fmt.Errorf("%s %s: %w", op, key, unreachable(k.nc, err))
}

// Get reads the key's last value by a direct get, as the server states it
// (directget.Stream.Last): its revision is the seq the server stored it at,
// whatever headers the writer put on it (nats.go's Get takes a writer's
// own Nats-Sequence header for the revision).
func (k *KV) Get(ctx context.Context, key string) (ledger.KVEntry, error) {
	if !apiKey(key) {
		return ledger.KVEntry{}, k.mapErr("get", key, jetstream.ErrInvalidKey)
	}
	st := k.stream()
	m, ok, err := st.Last(ctx, KVSubjectPrefix+k.kv.Bucket()+"."+key)
	if err != nil {
		return ledger.KVEntry{}, k.mapErr("get", key, err)
	}
	if !ok {
		return ledger.KVEntry{}, k.mapErr("get", key, jetstream.ErrKeyNotFound)
	}
	switch m.Header.Get(kvOperation) {
	case "DEL", "PURGE":
		return ledger.KVEntry{}, k.mapErr("get", key, jetstream.ErrKeyDeleted)
	}
	return ledger.KVEntry{Key: key, Value: m.Data, Revision: m.Seq, Created: m.Time}, nil
}

// stream is the bucket's stream, read by direct gets (by leader gets when
// the bucket does not allow them: one made before they were required).
func (k *KV) stream() directget.Stream {
	return directget.Stream{Conn: k.nc, Name: KVStream(k.kv.Bucket()), Timeout: k.timeout}
}

func (k *KV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	r, err := k.kv.Put(ctx, key, value)
	return r, k.mapErr("put", key, err)
}

func (k *KV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	r, err := k.kv.Create(ctx, key, value)
	return r, k.mapErr("create", key, err)
}

func (k *KV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	// A delete marker's revision is never handed out (Get and List answer
	// not found), so no caller can pass one: the server's check is the port's.
	r, err := k.kv.Update(ctx, key, value, last)
	if err != nil {
		return 0, k.mapErr("update", key, err)
	}
	return r, nil
}

func (k *KV) Delete(ctx context.Context, key string, last uint64) error {
	if !apiKey(key) {
		return k.mapErr("delete", key, k.deleteRaw(ctx, key, last))
	}
	if last == 0 {
		return k.mapErr("delete", key, k.kv.Delete(ctx, key))
	}
	return k.mapErr("delete", key, k.kv.Delete(ctx, key, jetstream.LastRevision(last)))
}

// apiKey reports whether the KV API (nats.go's) names key: the alphabet
// ledger.KV states. A raw publish to the bucket's subjects can store others.
func apiKey(key string) bool {
	if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") {
		return false
	}
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_=./-", c)) {
			return false
		}
	}
	return true
}

// deleteRaw deletes a key the KV API refuses to name, one a raw publish stored
// outside ledger.KV's alphabet (List hands it out, so that its value can be
// reported and removed): the delete marker the API would publish, on the
// key's subject.
func (k *KV) deleteRaw(ctx context.Context, key string, last uint64) error {
	if strings.ContainsAny(key, " \t\r\n*>") || strings.Contains(key, "..") {
		return fmt.Errorf("key %q is no subject of the bucket: %w", key, ledger.ErrInvalid)
	}
	js, err := jetstream.New(k.nc)
	if err != nil {
		return err
	}
	m := nats.NewMsg(KVSubjectPrefix + k.kv.Bucket() + "." + key)
	m.Header.Set("KV-Operation", "DEL")
	if last > 0 {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	}
	_, err = js.PublishMsg(ctx, m)
	return err
}

// List returns the bucket's keys that begin with prefix, with their values,
// sorted by key; deleted and purged keys are left out. It holds no state on
// the server: multi-last direct gets of the bucket's subjects (directget),
// no watch and no consumer, so any number of readers list a bucket at once
// and none can exhaust or move another's reading.
func (k *KV) List(ctx context.Context, prefix string) ([]ledger.KVEntry, error) {
	bucket := k.kv.Bucket()
	st := k.stream()
	keys := KVSubjectPrefix + bucket + "."
	msgs, err := st.LastPerSubject(ctx, keys+">")
	if err != nil {
		return nil, k.mapErr("list", prefix+"*", err)
	}
	var out []ledger.KVEntry
	for _, m := range msgs {
		switch m.Header.Get(kvOperation) {
		case "DEL", "PURGE":
			continue
		}
		key := strings.TrimPrefix(m.Subject, keys)
		if strings.HasPrefix(key, prefix) {
			out = append(out, ledger.KVEntry{Key: key, Value: m.Data, Revision: m.Seq, Created: m.Time})
		}
	}
	slices.SortFunc(out, func(a, b ledger.KVEntry) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// kvOperation is the header of a key-value bucket's delete and purge
// markers.
const kvOperation = "KV-Operation"

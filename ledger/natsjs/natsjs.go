package natsjs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// Stream metadata keys holding the ledger's settings.
const (
	MetaUUID   = "syncledger.uuid"
	MetaFormat = "syncledger.format"
	MetaBlobs  = "syncledger.blobs"
	MetaName   = "syncledger.name"

	// The namespace mark (ledger.Info.NamespaceOf, Namespace), on a
	// namespace's ledger only.
	MetaNamespaceOf = "syncledger.namespace-of"
	MetaNamespace   = "syncledger.namespace"
)

// Defaults.
const (
	DefaultTimeout       = 5 * time.Second // per request, when the caller's ctx has no deadline
	DefaultRetryAttempts = 6               // publish attempts for one Append
	DefaultRetryWait     = 50 * time.Millisecond
	DuplicateWindow      = 2 * time.Minute // the stream's Nats-Msg-Id dedupe window
	maxRetryWait         = 2 * time.Second
)

// MaxSubjectLen is the longest event subject (prefix plus escaped partition token)
// Append accepts. nats-server's default max_control_line is 4096 bytes, and a
// publish whose protocol line ("HPUB <subject> <reply> <sizes>") exceeds it makes
// the server close the connection — measured on 2.15.2 — so longer partition keys
// are refused with ErrTooLarge instead.
const MaxSubjectLen = 3072

// LedgerConfig describes a ledger to create.
type LedgerConfig struct {
	Name     string        // ledger name (ledger.ValidateName)
	UUID     string        // lineage; a random (v4) UUID is generated on create when empty
	Blobs    string        // blob store URL, stored in the stream metadata
	Replicas int           // stream replicas; 0 means 1
	MaxAge   time.Duration // 0 keeps events forever; see the package doc before setting it

	// NamespaceOf (a UUID) and Namespace, both or neither, mark the ledger as
	// that namespace of that ledger (ledger.Info), in the stream metadata.
	NamespaceOf string
	Namespace   string
}

// Option configures a Log.
type Option func(*options) error

type options struct {
	timeout    time.Duration
	attempts   int
	retryWait  time.Duration
	openSeq    bool          // WithOpenSeq
	followIdle time.Duration // WithFollowIdle
	// followPending bounds the republished messages a follower holds
	// unread (followPendingMsgs; tests set fewer): past it the client drops
	// them, and the follower reads by direct gets instead.
	followPending int
}

// WithOpenSeq lets the first LastSeq within 500 ms of Open answer from the
// stream info Open read (one request where a one-shot command's sync made
// two). Only a short-lived caller whose whole run counts as one moment may set
// it: nothing it learns between Open and that LastSeq — a lock taken, a
// message from another host — may promise a later seq, or its sync would miss
// the commits made before that promise (a long-lived process that takes a lock
// and then syncs, as the swamp agent does, must not). Default off.
func WithOpenSeq() Option {
	return func(o *options) error {
		o.openSeq = true
		return nil
	}
}

// WithTimeout sets the per-request timeout (default DefaultTimeout): each request
// to the server ends after it, or at the caller's deadline if that comes first. It
// bounds each request, not a whole Read, Append or Follow.
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("timeout %v: must be positive: %w", d, ledger.ErrInvalid)
		}
		o.timeout = d
		return nil
	}
}

// WithRetry sets how many times Append publishes a commit whose outcome is not
// known or that met a transient error (no responders during a leader election,
// timeouts, too many batches in flight), and the first wait between attempts
// (doubled each time, at most 2 s). Defaults: DefaultRetryAttempts, DefaultRetryWait.
func WithRetry(attempts int, wait time.Duration) Option {
	return func(o *options) error {
		if attempts < 1 || wait < 0 {
			return fmt.Errorf("retry %d attempts, wait %v: want at least 1 attempt and a non-negative wait: %w", attempts, wait, ledger.ErrInvalid)
		}
		o.attempts, o.retryWait = attempts, wait
		return nil
	}
}

// Log is a ledger's CommitLog on a JetStream stream: the portable ledger.Log
// (which checks every call's arguments and context once) over the JetStream
// driver, with the adapter's own operations beside it. It is safe for
// concurrent use.
type Log struct {
	*ledger.Log
	d *logDriver
}

// wrap returns the Log over d.
func wrap(d *logDriver) *Log { return &Log{Log: ledger.NewLog(d), d: d} }

// Driver returns the JetStream driver under the log, for ledger/drivertest's
// suite, which runs on a portable ledger.Log of its own over it.
func (l *Log) Driver() ledger.LogDriver { return l.d }

// Name returns the ledger name.
func (l *Log) Name() string { return l.d.name }

// Stream returns the JetStream stream name.
func (l *Log) Stream() string { return l.d.stream }

// UUID returns the ledger's lineage as read when the Log was opened.
func (l *Log) UUID() string { return l.d.uuid }

// logDriver is the ledger.LogDriver of a ledger's stream: it is called with
// the arguments and the live context ledger.Log has checked.
type logDriver struct {
	nc     *nats.Conn
	rnc    *nats.Conn // reads by direct get: nc, or a Client's read endpoint
	js     jetstream.JetStream
	name   string // ledger name
	stream string // stream name
	prefix string // subject prefix, "syncledger.<name>.p."
	uuid   string // lineage, read at open
	// republish: the stream republishes what it stores (expect.go
	// ledgerRePublish); false on a ledger made before that, whose followers
	// then read the head every followTick.
	republish bool
	info      ledger.Info
	opts      options

	faults faults // fault injection: empty unless built with -tags failpoints

	q quarantines // the quarantine notices read so far

	opened opened // the head Open's answer carried, for the first LastSeq or Head

	// rep, when set, is the mirror this Log reads through (mirror.go): its
	// reads go to the mirror and, for what the mirror cannot give, to the
	// origin; its writes go to the origin (nc).
	rep *replica
}

// openFresh is how long after Open its answer's last seq may answer the first
// LastSeq: a command's open and its sync's fast path are a few milliseconds
// apart, and one STREAM.INFO then does the work of two (issue 17).
const openFresh = 500 * time.Millisecond

// opened is the head of the stream info answer that opened the Log (the
// origin's, or through a mirror the mirror's), until the first LastSeq or
// Head takes it, it ages past openFresh, or the Log writes.
type opened struct {
	mu    sync.Mutex
	head  ledger.Head
	at    time.Time
	valid bool
}

// take returns the head Open read, once, if it is still fresh.
func (o *opened) take() (ledger.Head, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ok := o.valid && time.Since(o.at) < openFresh
	o.valid = false
	return o.head, ok
}

// drop forgets it: this Log is about to write (append, quarantine, purge).
func (o *opened) drop() {
	o.mu.Lock()
	o.valid = false
	o.mu.Unlock()
}

var (
	_ ledger.CommitLog = (*Log)(nil)
	_ ledger.LogDriver = (*logDriver)(nil)
)

func newLog(nc *nats.Conn, name string, opts []Option) (*logDriver, error) {
	if nc == nil {
		return nil, fmt.Errorf("open ledger %q: nil connection: %w", name, ledger.ErrInvalid)
	}
	if err := ledger.ValidateName(name); err != nil {
		return nil, err
	}
	o := options{timeout: DefaultTimeout, attempts: DefaultRetryAttempts, retryWait: DefaultRetryWait, followIdle: DefaultFollowIdle, followPending: followPendingMsgs}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("open ledger %q: %w", name, err)
		}
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.timeout))
	if err != nil {
		return nil, fmt.Errorf("open ledger %q: %w", name, err)
	}
	return &logDriver{
		nc: nc, rnc: nc, js: js, name: name, stream: ledger.StreamName(name),
		prefix: ledger.SubjectPrefix(name), opts: o,
	}, nil
}

// CreateLog creates the ledger's stream and its side resources (its heartbeat
// and swamp buckets, its dead-letter stream: expect.go), or opens it if it
// exists: creating is idempotent, and an existing ledger's UUID and settings
// win (Ledger.Upgrade makes an existing one's resources so). A cfg.UUID or
// cfg.Blobs that differs from the existing ledger's is an error wrapping
// ledger.ErrInvalid naming both values; an empty one means "no preference".
func CreateLog(ctx context.Context, nc *nats.Conn, cfg LedgerConfig, opts ...Option) (*Log, error) {
	d, err := createLog(ctx, nc, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return wrap(d), nil
}

func createLog(ctx context.Context, nc *nats.Conn, cfg LedgerConfig, opts ...Option) (*logDriver, error) {
	l, err := newLog(nc, cfg.Name, opts)
	if err != nil {
		return nil, err
	}
	if cfg.UUID != "" {
		if err := ledger.ValidateUUID(cfg.UUID); err != nil {
			return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
		}
	}
	if cfg.Replicas < 0 || cfg.Replicas > 5 {
		return nil, fmt.Errorf("create ledger %q: replicas %d outside 1..5: %w", cfg.Name, cfg.Replicas, ledger.ErrInvalid)
	}
	if cfg.MaxAge < 0 {
		return nil, fmt.Errorf("create ledger %q: negative max age: %w", cfg.Name, ledger.ErrInvalid)
	}
	if err := checkNamespaceMark(cfg.NamespaceOf, cfg.Namespace); err != nil {
		return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
	}
	uuid := cfg.UUID
	if uuid == "" {
		if uuid, err = ledger.NewLineageID(rand.Reader); err != nil {
			return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
		}
	}
	sc := l.streamConfig(cfg, uuid)

	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	for range 3 {
		info, err := l.js.Stream(ctx, l.stream)
		if err == nil {
			st, err := settingsOf(info.CachedInfo().Config)
			if err == nil {
				err = l.adopt(st)
			}
			if err != nil {
				return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
			}
			if cfg.UUID != "" && cfg.UUID != l.uuid {
				return nil, fmt.Errorf("create ledger %q: it exists with uuid %s, not %s: %w", cfg.Name, l.uuid, cfg.UUID, ledger.ErrInvalid)
			}
			if have := info.CachedInfo().Config.Metadata[MetaBlobs]; cfg.Blobs != "" && cfg.Blobs != have {
				return nil, fmt.Errorf("create ledger %q: it exists with blobs %q, not %q: %w", cfg.Name, have, cfg.Blobs, ledger.ErrInvalid)
			}
			// An existing ledger without the mark is left to the caller (a
			// namespace's ledger made before the mark, or another ledger).
			if have := l.info; cfg.NamespaceOf != "" && have.NamespaceOf != "" && (have.NamespaceOf != cfg.NamespaceOf || have.Namespace != cfg.Namespace) {
				return nil, fmt.Errorf("create ledger %q: it exists as namespace %q of ledger %s, not namespace %q of ledger %s: %w",
					cfg.Name, have.Namespace, have.NamespaceOf, cfg.Namespace, cfg.NamespaceOf, ledger.ErrInvalid)
			}
			// A stream just created on a cluster answers direct gets only once
			// its replicas are set up: return a ledger ready to be read.
			if _, _, err := l.directLast(ctx, ledger.Subject(l.name, "")); err != nil {
				return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
			}
			return l, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
		}
		_, err = l.js.CreateStream(ctx, sc)
		if err == nil {
			// A ledger is its stream and its side resources (expect.go):
			// the admin who makes one makes them all.
			if err := provisionSide(ctx, l.js, cfg.Name, sc.Replicas); err != nil {
				return nil, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
			}
			continue // read it back
		}
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			continue // created concurrently by someone else: read it back
		}
		if full := ServerFull(err); full != nil {
			err = full
		}
		return nil, fmt.Errorf("create ledger %q: create stream %s: %w", cfg.Name, l.stream, err)
	}
	return nil, fmt.Errorf("create ledger %q: stream %s keeps appearing and disappearing", cfg.Name, l.stream)
}

func (l *logDriver) streamConfig(cfg LedgerConfig, uuid string) jetstream.StreamConfig {
	replicas := max(cfg.Replicas, 1)
	dup := DuplicateWindow
	if cfg.MaxAge > 0 && cfg.MaxAge < dup {
		dup = cfg.MaxAge // the server requires duplicates ≤ max age
	}
	sc := jetstream.StreamConfig{
		Name:               l.stream,
		Description:        "syncledger ledger " + l.name,
		Subjects:           []string{l.prefix + ">"},
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardOld,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  -1,
		MaxAge:             cfg.MaxAge,
		Storage:            jetstream.FileStorage,
		Replicas:           replicas,
		Duplicates:         dup,
		DenyDelete:         true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		RePublish:          ledgerRePublish(l.name),
		Metadata: map[string]string{
			MetaUUID:   uuid,
			MetaFormat: strconv.Itoa(ledger.LogFormat),
			MetaBlobs:  cfg.Blobs,
			MetaName:   l.name,
		},
	}
	if cfg.NamespaceOf != "" {
		sc.Metadata[MetaNamespaceOf], sc.Metadata[MetaNamespace] = cfg.NamespaceOf, cfg.Namespace
	}
	return sc
}

// Open opens an existing ledger. A missing one is an error wrapping
// ledger.ErrNotFound; a ledger whose format is newer than this build reads wraps
// ledger.ErrUnknownVersion; a stream that is not a syncledger ledger wraps
// ledger.ErrInvalid.
func OpenLog(ctx context.Context, nc *nats.Conn, name string, opts ...Option) (*Log, error) {
	d, err := openLog(ctx, nc, name, opts...)
	if err != nil {
		return nil, err
	}
	return wrap(d), nil
}

func openLog(ctx context.Context, nc *nats.Conn, name string, opts ...Option) (*logDriver, error) {
	l, err := newLog(nc, name, opts)
	if err != nil {
		return nil, err
	}
	// One STREAM.INFO decoded into the few fields adopt reads: every command
	// opens the log, and decoding jetstream.StreamInfo whole (its reflection
	// setup) cost a no-op sync about 5% of its CPU.
	var st streamConfig
	asOf := time.Now()
	err = l.request(ctx, apiPrefix+"STREAM.INFO."+l.stream, nil, &st)
	if code, ok := apiCode(err); ok && code == codeStreamNotFound {
		return nil, fmt.Errorf("open ledger %q: stream %s does not exist: %w", name, l.stream, ledger.ErrNoLedger)
	}
	if err != nil {
		return nil, fmt.Errorf("open ledger %q: %w", name, err)
	}
	if err := l.adopt(&st.Config); err != nil {
		return nil, fmt.Errorf("open ledger %q: %w", name, err)
	}
	if l.opts.openSeq {
		l.opened = opened{head: ledger.Head{Seq: ledger.Seq(st.State.LastSeq), Stamp: st.State.stamp(), AsOf: asOf}, at: time.Now(), valid: true}
	}
	return l, nil
}

// adopt checks that c describes a syncledger stream this build can use — its
// identity (the metadata), then its settings (expect.go ledgerStream) — and
// records its lineage.
func (l *logDriver) adopt(c *streamSettings) error {
	if err := l.identify(c); err != nil {
		return err
	}
	if err := l.notMirror(c); err != nil {
		return err
	}
	if err := ledgerStream(l.name).check(c); err != nil {
		return err
	}
	l.republish = republishes(l.name).holds(c)
	l.record(c)
	return nil
}

// notMirror returns a *MirrorNotOriginError if c, identified (identify), is a
// mirror of the ledger: what --nats reaches is a server of the mirror's region.
func (l *logDriver) notMirror(c *streamSettings) error {
	if len(c.Mirror) == 0 || string(c.Mirror) == "null" {
		return nil
	}
	return &MirrorNotOriginError{Ledger: l.name, Stream: l.stream, Of: c.Metadata[MetaMirrorOf], Domain: c.Metadata[MetaMirrorDomain]}
}

// record takes the ledger's identity from c, identified (identify).
func (l *logDriver) record(c *streamSettings) {
	md := c.Metadata
	f, _ := strconv.Atoi(md[MetaFormat])
	l.uuid = md[MetaUUID]
	l.info = ledger.Info{Name: md[MetaName], UUID: md[MetaUUID], Format: f, Blobs: md[MetaBlobs], Replicas: c.Replicas}
	if checkNamespaceMark(md[MetaNamespaceOf], md[MetaNamespace]) == nil {
		l.info.NamespaceOf, l.info.Namespace = md[MetaNamespaceOf], md[MetaNamespace]
	}
}

// identify checks that c's metadata makes it a ledger of this name, in a
// format this build reads, with a lineage.
func (l *logDriver) identify(c *streamSettings) error {
	md := c.Metadata
	if md[MetaName] == "" && md[MetaUUID] == "" {
		return fmt.Errorf("stream %s has no syncledger metadata: not a ledger: %w", l.stream, ledger.ErrInvalid)
	}
	if md[MetaName] != l.name {
		return fmt.Errorf("stream %s holds ledger %q, not %q: %w", l.stream, md[MetaName], l.name, ledger.ErrInvalid)
	}
	f, err := strconv.Atoi(md[MetaFormat])
	if err != nil || f < 1 {
		return fmt.Errorf("stream %s: bad %s %q: %w", l.stream, MetaFormat, md[MetaFormat], ledger.ErrInvalid)
	}
	if f > ledger.LogFormat {
		return fmt.Errorf("stream %s has format %d (this build reads 1 to %d; upgrade syncledger): %w", l.stream, f, ledger.LogFormat, ledger.ErrUnknownVersion)
	}
	if err := ledger.ValidateUUID(md[MetaUUID]); err != nil {
		return fmt.Errorf("stream %s: %s: %w", l.stream, MetaUUID, err)
	}
	return nil
}

// Info returns the ledger's settings as the stream stored them when the log was
// opened. They are fixed at creation, so Info makes no request: the sync fast
// path stays at one request (LastSeq), and LastSeq and Bounds check on every call
// that the stream still carries the lineage read at open (ErrLineage if a ledger
// of the same name was deleted and created again).
func (l *logDriver) Info() ledger.Info { return l.info }

// Delete deletes the ledger's stream and every event in it. For tests and
// operators; a deleted ledger cannot be recovered from the log.
func (l *Log) Delete(ctx context.Context) error { return l.d.delete(ctx) }

func (l *logDriver) delete(ctx context.Context) error {
	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	if err := l.js.DeleteStream(ctx, l.stream); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("delete ledger %q: %w", l.name, ledger.ErrNotFound)
		}
		return fmt.Errorf("delete ledger %q: %w", l.name, err)
	}
	return nil
}

// reqCtx bounds one request by the per-request timeout (WithTimeout), or by ctx's
// deadline when that comes first. A request to a server that went away (a stream
// leader killed mid-call) then fails after the per-request timeout and the caller's
// retry or ambiguity resolution goes on, instead of one request eating the caller's
// whole deadline.
func (l *logDriver) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.opts.timeout)
}

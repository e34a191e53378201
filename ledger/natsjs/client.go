package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsblob"
)

// Config is how a Client reaches NATS.
type Config struct {
	// Write is the server (or cluster) every write goes to: commits, buckets,
	// the object store, admin operations; and every read too, unless Read is
	// set. Required.
	Write Endpoint
	// Read, when its URL is set, is a server near this host that the log's
	// reads by direct get go to (a host far from the servers). It must serve
	// the ledger's stream under its own name and sequence numbers (a server
	// of the same cluster or JetStream domain); mirrors in their own domain,
	// and what a lagging one may answer, are issue 40's. The zero value: one
	// connection for everything, as before there were two settings.
	Read Endpoint
	// Name is the client's name on the server (its connection name).
	Name string
	// ConnectTimeout bounds a connect whose ctx has no deadline
	// (DefaultConnectTimeout when 0).
	ConnectTimeout time.Duration
	// Timeout bounds each request whose ctx has no deadline (DefaultTimeout
	// when 0). It is every Log's, Feed's and bucket's WithTimeout.
	Timeout time.Duration
	// Refused, when set, receives each refusal of the server (a permissions
	// violation) that no operation of the Client claimed. An operation the
	// server refuses fails with a *ledger.PermissionError either way (at once
	// where the Client watches for it: key-value buckets, appends, stream
	// updates); a refusal nobody claimed may be of a request that will only
	// time out, and a command may want to end on it.
	Refused func(*ledger.PermissionError)
	// Logger receives the Client's debug notes (the server's asynchronous
	// errors); nil: none. The Client never logs above debug.
	Logger *slog.Logger
}

// Client is a connection to NATS (two with a Read endpoint) and everything
// syncledger keeps there: each ledger's log, feed and key-value buckets
// (Ledger), the object store (ObjectStore). It is the one constructor of this
// package for applications: it builds the connection from a Config, maps the
// server's refusals to typed errors, and verifies each resource it opens.
// It is safe for concurrent use.
type Client struct {
	w, r    *nats.Conn // r is w without a Read endpoint
	cfg     Config
	watches watches
	// wdown: with a Read endpoint, the write connection's last attempt to
	// connect failed (dialBehind): the origin is out of reach.
	wdown atomic.Bool
}

// Open connects to cfg.Write (and cfg.Read, when set). It sends no request:
// each resource is opened, and checked, on first use by the methods that
// return it.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Write.URL == "" && cfg.Write.InProcess == nil {
		return nil, fmt.Errorf("open NATS client: no write endpoint: %w", ledger.ErrInvalid)
	}
	if cfg.Timeout < 0 || cfg.ConnectTimeout < 0 {
		return nil, fmt.Errorf("open NATS client: negative timeout: %w", ledger.ErrInvalid)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	c := &Client{cfg: cfg}
	if cfg.Read.URL == "" && cfg.Read.InProcess == nil {
		w, err := dial(ctx, cfg.Write, cfg.Name, cfg.ConnectTimeout, c.asyncError)
		if err != nil {
			return nil, err
		}
		c.w, c.r = w, w
		return c, nil
	}
	// A Read endpoint is near this host, Write may be far (another region)
	// or out of reach: the read connection is made first, and the write one
	// in the background (dialBehind), so that reads never wait for it.
	r, err := dial(ctx, cfg.Read, cfg.Name+" (reads)", cfg.ConnectTimeout, c.asyncError)
	if err != nil {
		return nil, fmt.Errorf("read endpoint: %w", err)
	}
	w, err := dialBehind(ctx, cfg.Write, cfg.Name, cfg.ConnectTimeout, c.asyncError, &c.wdown)
	if err != nil {
		r.Close()
		return nil, err
	}
	c.w, c.r = w, r
	return c, nil
}

// Close closes the Client's connections. What it opened stops working.
func (c *Client) Close() {
	if c.r != c.w {
		c.r.Close()
	}
	c.w.Close()
}

// asyncError receives the server's asynchronous errors on the Client's
// connections: a refusal fails the operation watching its subject, or goes to
// Config.Refused.
func (c *Client) asyncError(_ *nats.Conn, _ *nats.Subscription, err error) {
	pe, ok := refusalOf(err)
	switch {
	case !ok:
		c.debug("NATS asynchronous error", err)
	case isCleanup(pe.Subject):
		c.debug("the NATS server refused a consumer cleanup", err)
	default:
		c.debug("the NATS server refused an operation", err)
		if !c.watches.route(pe) && c.cfg.Refused != nil {
			c.cfg.Refused(pe)
		}
	}
}

func (c *Client) debug(msg string, err error) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.Debug(msg, "err", err)
	}
}

// ObjectStore opens the object store bucket (a nats://BUCKET blob store). The
// admin makes it (UpgradeObjectStore: init, serve, upgrade): a missing bucket,
// or one whose settings differ from what syncledger creates (expect.go
// objectStore: one that is not write-once, for instance), is a
// *ledger.ConfigError naming the upgrade. replicas is unused: the bucket is
// the admin's as made. Its signature is blobs.Options' NATS.
func (c *Client) ObjectStore(ctx context.Context, bucket string, replicas int) (driver.Bucket, error) {
	_ = replicas
	s, err := natsblob.New(ctx, natsblob.Config{Conn: c.w, Bucket: bucket, NoCreate: true})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, objectStore(bucket).missing()
	}
	if err != nil {
		return nil, err // not a nil *Store in a non-nil interface
	}
	if err := objectStore(bucket).checkConfig(s.Configured()); err != nil {
		return nil, err
	}
	return s, nil
}

// Ledger returns the resources of the ledger named name on the Client's
// connections. It sends no request.
func (c *Client) Ledger(name string) *Ledger { return &Ledger{c: c, name: name} }

// Ledger is one ledger's resources on a Client: its log, feed and key-value
// buckets, each opened (and checked) by the method that returns it.
type Ledger struct {
	c    *Client
	name string
}

// Name returns the ledger's name.
func (l *Ledger) Name() string { return l.name }

func (l *Ledger) options(opts []Option) []Option {
	return append([]Option{WithTimeout(l.c.cfg.Timeout)}, opts...)
}

// Log opens the ledger's log (OpenLog): one stream info request. A missing
// ledger is an error wrapping ledger.ErrNoLedger.
//
// With a Read endpoint, that request goes to it: when it serves a mirror of
// the ledger (mirror.go), the Log reads there and writes to the origin,
// checking the origin in the background (a write waits for that check); when
// it serves the origin's stream itself (a server of its cluster), the Log
// opens the origin and reads there by direct gets.
func (l *Ledger) Log(ctx context.Context, opts ...Option) (*Log, error) {
	if l.c.r != l.c.w {
		lg, ok, err := openReplica(ctx, l.c.w, l.c.r, l.name, l.options(opts), l.c.wdown.Load)
		if err != nil {
			return nil, err
		}
		if ok {
			return wrap(lg), nil
		}
	}
	lg, err := openLog(ctx, l.c.w, l.name, l.options(opts)...)
	if err != nil {
		return nil, err
	}
	l.bind(lg)
	if !lg.republish && l.c.cfg.Logger != nil {
		l.c.cfg.Logger.Warn(fmt.Sprintf("ledger %q was made by an earlier release: its stream does not republish what it stores, so followers (watch, log --follow) read its head every %v; way out: syncledger upgrade (admin)", l.name, followTick))
	}
	return wrap(lg), nil
}

// Create creates the ledger's stream with cfg, or opens it if it exists
// (CreateLog); cfg.Name is the ledger's. It is the admin's: the Log it
// returns reads and writes through the write endpoint.
func (l *Ledger) Create(ctx context.Context, cfg LedgerConfig, opts ...Option) (*Log, error) {
	cfg.Name = l.name
	return CreateLog(ctx, l.c.w, cfg, l.options(opts)...)
}

// bind gives a Log the Client's read connection.
func (l *Ledger) bind(lg *logDriver) { lg.rnc = l.c.r }

// Feed returns the ledger's feed (NewFeed). It sends no request. A consumer
// request the server refuses fails at once with a *ledger.PermissionError.
func (l *Ledger) Feed() (*Feed, error) {
	f, err := NewFeed(l.c.w, l.name, l.options(nil)...)
	if err != nil {
		return nil, err
	}
	f.d.watches = &l.c.watches
	return f, nil
}

// Heartbeats returns the ledger's heartbeat bucket (HeartbeatKV), opened on
// first use. Its operations the server refuses fail at once with a
// *ledger.PermissionError.
func (l *Ledger) Heartbeats() (*BucketKV, error) {
	b, err := HeartbeatKV(l.c.w, l.name, l.options(nil)...)
	if err != nil {
		return nil, err
	}
	b.watches = &l.c.watches
	return b, nil
}

// SwampKV opens the ledger's swamp bucket (SwampBucket: swamp's locks,
// control plane and namespace registry), made with the ledger (a missing one
// is a *ledger.ConfigError naming the upgrade). Its operations the server refuses fail at once with a
// *ledger.PermissionError.
func (l *Ledger) SwampKV(ctx context.Context) (*BucketKV, error) {
	b, err := newBucketKV(l.c.w, l.name, SwampBucket(l.name), l.options(nil))
	if err != nil {
		return nil, err
	}
	b.watches = &l.c.watches
	if _, err := b.Open(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// RePublish gives the ledger's stream its republish (expect.go
// ledgerRePublish) if it has none or another, and reports whether it
// changed it; nothing else of the stream changes. It needs the admin role.
// It is the repair of a ledger made before followers read the republish
// (Log refuses one without it, naming this): syncledger init runs it.
func (l *Ledger) RePublish(ctx context.Context) (bool, error) {
	js, err := jetstream.New(l.c.w, jetstream.WithDefaultTimeout(l.c.cfg.Timeout))
	if err != nil {
		return false, err
	}
	stream := ledger.StreamName(l.name)
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("ledger %q republish: stream %s does not exist: %w", l.name, stream, ledger.ErrNoLedger)
	}
	if err != nil {
		return false, fmt.Errorf("ledger %q republish: %w", l.name, err)
	}
	c := st.CachedInfo().Config
	if c.Metadata[MetaName] != l.name {
		return false, fmt.Errorf("ledger %q republish: stream %s holds no ledger %q: %w", l.name, stream, l.name, ledger.ErrInvalid)
	}
	want := ledgerRePublish(l.name)
	if r := c.RePublish; r != nil && *r == *want {
		return false, nil
	}
	c.RePublish = want
	if _, err := js.UpdateStream(ctx, c); err != nil {
		return false, fmt.Errorf("ledger %q republish: update stream %s: %w", l.name, stream, err)
	}
	return true, nil
}

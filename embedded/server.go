package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/loopback"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// DefaultListen is the address Start listens on when Config.Listen is empty.
const DefaultListen = "127.0.0.1:4222"

// Errors Start returns; test them with errors.Is.
var (
	// ErrDirInUse: another server (this or another process) holds the data
	// directory's lock. The error is a *DirInUseError.
	ErrDirInUse = errors.New("data directory in use")
	// ErrInsecure: the listen address is not loopback and no authentication is
	// configured.
	ErrInsecure = errors.New("refusing to serve without authentication")
	// ErrConfig: the Config is malformed.
	ErrConfig = errors.New("invalid server config")
)

// DirInUseError names the data directory and, when known, the pid holding it.
type DirInUseError struct {
	Dir string
	PID int // 0 if unknown
}

func (e *DirInUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data directory %s is in use by another process", e.Dir)
	}
	return fmt.Sprintf("data directory %s is in use by pid %d", e.Dir, e.PID)
}

func (e *DirInUseError) Unwrap() error { return ErrDirInUse }

// Config configures an embedded server. The zero value is not valid: DataDir is
// required.
type Config struct {
	// Listen is the client address, host:port. Empty means DefaultListen; port 0
	// picks a free port (see (*Server).ClientURL). A host that is not a loopback
	// IP or "localhost" (including "" and "0.0.0.0") requires authentication.
	Listen string
	// DataDir holds the JetStream store (DataDir/jetstream) and the lock file; it
	// is created (0700) if absent. Other users of the directory (a blob store
	// under DataDir/blobs, say) are the caller's.
	DataDir string
	// Token, or User and Password, require clients to authenticate. At most one
	// of the two may be set.
	Token    string
	User     string
	Password string
	// Users are further client accounts with their own permissions (see User).
	// They may be given with User and Password (then an unrestricted user), not
	// with Token.
	Users []User
	// TLS configures TLS for TCP clients (see TLS); the zero value is plain TCP.
	TLS TLS
	// SyncAlways makes JetStream fsync every write before acknowledging it, so an
	// acknowledged commit survives power loss, not only a process crash.
	SyncAlways bool
	// ServerName is the server's name in monitoring; default "syncledger".
	ServerName string
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// StartTimeout bounds how long Start waits for the server; default 30s.
	StartTimeout time.Duration
	// Reserve is the free space, in bytes, the server keeps on DataDir's
	// filesystem: while less is free it refuses every write at once (clients
	// see ledger.ErrServerFull), and it takes writes again, without a restart,
	// once Reserve and half as much again are free. 0 means DefaultReserve;
	// negative turns the disk watch off (nats-server's own behaviour: a write
	// that finds the disk full is never answered, and its stream refuses
	// writes until the server restarts).
	Reserve int64
	// DiskInterval is the longest time between two readings of the free
	// space; 0 means DefaultDiskInterval. Nearer the reserve the watch reads
	// it more often (before writes at 1 GiB/s could reach it), and a write
	// that fails for lack of space wakes it at once.
	DiskInterval time.Duration

	// statDisk replaces fsx.DiskSpace in tests.
	statDisk func(dir string) (free, size uint64, noInodes bool, err error)
}

// Server is a running embedded nats-server holding its data directory's lock.
type Server struct {
	ns     *server.Server
	opts   *server.Options
	lock   *dirLock
	cfg    Config
	addr   *net.TCPAddr
	once   sync.Once
	logger *slog.Logger
	logs   *logAdapter
	disk   *diskWatch // nil when off
	// internalPassword is the password of internalUser, when Config.Users is set.
	internalPassword string

	usersMu sync.Mutex // SetUsers
}

// validate checks cfg and returns the listen host and port (server.RANDOM_PORT
// for port 0).
func (cfg *Config) validate() (host string, port int, err error) {
	if cfg.DataDir == "" {
		return "", 0, fmt.Errorf("no data directory: %w", ErrConfig)
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	host, ps, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "", 0, fmt.Errorf("listen address %q: want host:port: %w", cfg.Listen, ErrConfig)
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("listen address %q: bad port: %w", cfg.Listen, ErrConfig)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := cfg.validateAuth(); err != nil {
		return "", 0, err
	}
	if !loopback.Host(host) && !cfg.authenticated() {
		return "", 0, fmt.Errorf("%w on %s: not a loopback address, and no token, user and password, users or verified client certificates are set", ErrInsecure, cfg.Listen)
	}
	return host, port, nil
}

// Start validates cfg, locks the data directory and starts the server with
// JetStream. It returns once the server accepts clients, or an error after which
// nothing is left running and the lock is released.
func Start(cfg Config) (*Server, error) {
	host, port, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start server: data directory: %w", err)
	}
	cfg.DataDir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start server: create data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	s, err := start(cfg, host, port)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("start server: %w", err)
	}
	s.lock = lock
	if cfg.Reserve >= 0 {
		s.startDiskWatch()
	}
	return s, nil
}

func start(cfg Config, host string, port int) (*Server, error) {
	name := cfg.ServerName
	if name == "" {
		name = "syncledger"
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.DataDir,
		SyncAlways: cfg.SyncAlways,
		NoSigs:     true,
	}
	if cfg.Reserve >= 0 {
		opts.JetStreamMaxStore = noStoreLimit // the disk watch is the limit
	}
	internalPassword, err := cfg.authOptions(opts)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	log := newLogAdapter(cfg.Logger)
	ns.SetLoggerV2(log, log.enabled(slog.LevelDebug), log.enabled(levelTrace), false)

	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ns.Start()
	deadline := time.Now().Add(timeout)
	for !ns.ReadyForConnections(50 * time.Millisecond) {
		if msg := log.fatal(); msg != "" {
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, errors.New(msg)
		}
		if time.Now().After(deadline) {
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil, fmt.Errorf("not ready after %s", timeout)
		}
	}
	if msg := log.fatal(); msg != "" || !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		if msg == "" {
			msg = "JetStream is not enabled"
		}
		return nil, errors.New(msg)
	}
	addr, _ := ns.Addr().(*net.TCPAddr)
	if addr == nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, errors.New("no client listener")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{ns: ns, opts: opts, cfg: cfg, addr: addr, internalPassword: internalPassword, logger: logger, logs: log}, nil
}

// jsConfig is the JetStream configuration the server started with, for a
// restart of JetStream in process (as nats-server's own restart builds it).
func (s *Server) jsConfig() *server.JetStreamConfig {
	o := s.opts
	return &server.JetStreamConfig{StoreDir: o.StoreDir, SyncInterval: o.SyncInterval, SyncAlways: o.SyncAlways,
		MaxMemory: o.JetStreamMaxMemory, MaxStore: o.JetStreamMaxStore, Domain: o.JetStreamDomain, Strict: !o.NoJetStreamStrict}
}

// ClientURL is a URL clients on this machine dial: the listen address with its
// actual port, with a wildcard host ("0.0.0.0", "::", "") replaced by loopback;
// its scheme is tls:// when TLS is configured, else nats://. It never contains
// credentials.
func (s *Server) ClientURL() string {
	scheme := "nats://"
	if s.cfg.TLS.enabled() {
		scheme = "tls://"
	}
	return scheme + s.hostPort()
}

func (s *Server) hostPort() string {
	ip := s.addr.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(s.addr.Port))
}

// Port is the client port the server listens on.
func (s *Server) Port() int { return s.addr.Port }

// DataDir is the absolute data directory the server holds.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// NATS returns the underlying nats-server, for callers that need more than this
// package offers (monitoring, tests).
func (s *Server) NATS() *server.Server { return s.ns }

// Connect opens a client connection to the server in-process (no TCP, no TLS),
// with the configured credentials: with Config.Users set, as an internal user
// without restrictions. Extra options are applied after those.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := []nats.Option{nats.InProcessServer(s.ns), nats.Name("syncledger-serve")}
	switch {
	case s.internalPassword != "":
		all = append(all, nats.UserInfo(internalUser, s.internalPassword))
	case s.cfg.Token != "":
		all = append(all, nats.Token(s.cfg.Token))
	case s.cfg.User != "":
		all = append(all, nats.UserInfo(s.cfg.User, s.cfg.Password))
	}
	nc, err := nats.Connect("nats://"+s.hostPort(), append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to embedded server: %w", err)
	}
	return nc, nil
}

// Endpoint is where a natsjs.Client reaches the server in process (no TCP,
// no TLS), with the credentials Connect uses: a command run inside serve
// opens its Client on it.
func (s *Server) Endpoint() natsjs.Endpoint {
	e := natsjs.Endpoint{URL: "nats://" + s.hostPort(), InProcess: s.ns}
	switch {
	case s.internalPassword != "":
		e.User, e.Password = internalUser, s.internalPassword
	case s.cfg.Token != "":
		e.Token = s.cfg.Token
	case s.cfg.User != "":
		e.User, e.Password = s.cfg.User, s.cfg.Password
	}
	return e
}

// Shutdown stops the server (lame-duck free: clients are disconnected), waits until
// it has stopped and its store is closed, then releases the data directory. It is
// safe to call more than once.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		if s.disk != nil {
			s.disk.close()
		}
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		s.lock.release()
	})
}

// Run blocks until ctx is done, then shuts the server down.
func (s *Server) Run(ctx context.Context) {
	<-ctx.Done()
	s.Shutdown()
}

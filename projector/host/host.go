package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/statedb"
)

// Errors of the shell.
var (
	// ErrLocalChanges: applying the ledger would overwrite or delete a file changed
	// locally; commit (or discard) it first. It wraps ledger.ErrConflict.
	ErrLocalChanges = fmt.Errorf("local changes would be overwritten: %w", ledger.ErrConflict)
	// ErrCommitConflict: a commit's paths were also changed remotely. It wraps
	// ledger.ErrConflict.
	ErrCommitConflict = fmt.Errorf("commit conflicts with remote changes: %w", ledger.ErrConflict)
)

// ConflictError names the paths changed both locally and remotely.
type ConflictError struct {
	Paths []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %q (local files kept, still uncommitted): %s", ErrCommitConflict, e.Paths, resolveHint)
}

func (e *ConflictError) Unwrap() error { return ErrCommitConflict }

// LocalChangesError names the locally changed files a sync refused to overwrite.
type LocalChangesError struct {
	Paths []string
}

func (e *LocalChangesError) Error() string {
	return fmt.Sprintf("%v: %q (nothing was overwritten): commit them first, or %s", ErrLocalChanges, e.Paths, resolveHint)
}

func (e *LocalChangesError) Unwrap() error { return ErrLocalChanges }

// Config configures a Host.
type Config struct {
	Cache string           // cache directory
	Host  string           // this host's id, recorded in its commits
	Log   ledger.CommitLog // the ledger's log
	Blobs *ledger.Bucket   // the ledger's blob store
	// Snapshots is the bucket holding the ledger's snapshots (rebuild,
	// status); nil means Blobs (snapshots live beside the blobs).
	Snapshots *ledger.Bucket
	// Logger receives progress and warnings; nil discards.
	Logger *slog.Logger
	// Now is the clock for commit times; nil means time.Now.
	Now func() time.Time
	// Rand is the entropy for commit ids; nil means crypto/rand.
	Rand io.Reader
	// Parallel bounds concurrent blob transfers; 0 means 16.
	Parallel int
	// BatchEvents bounds how many events one Ready (one transaction, one flush)
	// covers; 0 means 4096. A Ready holds one change per path, so a long replay
	// over few paths applies each path once per batch, not once per event.
	BatchEvents int
	// CommitPartitions bounds the partitions of one published commit; 0, or
	// more than ledger.MaxBatch (the most one JetStream atomic batch holds),
	// means ledger.MaxBatch. A wider change is split (Commit).
	CommitPartitions int
	// CommitHold bounds the changed files a commit holds at once; 0 means
	// DefaultCommitHold. A larger change is published as several commits,
	// each of whole partitions and at most an eighth of this many files (one
	// partition with more is a commit of its own), so that a datastore's
	// first push takes memory by this bound, not by its size (Commit).
	CommitHold int
	// LockWait is how long to wait for another process holding the cache; 0 means 10s.
	LockWait time.Duration
	// Policy is the one retry policy of every push (Commit), and the bound
	// of every wait of an operation that reaches the ledger (wait.go); the
	// zero value is the default.
	Policy Policy
	// Waiting, when set, hears of each wait an operation reports (Wait:
	// after Policy.Report with no answer, then every four Reports), from a
	// goroutine of its own: it must be safe for concurrent use and not
	// block. Nil: the waits are logged (Logger, warn).
	Waiting func(Wait)

	local bool // OpenLocal: no ledger
}

// Host is one cache bound to one ledger. Its operations are for one goroutine
// at a time (HWM excepted). Open takes the cache (the state database's file
// lock) and keeps it, so a process that runs a few operations pays for it
// once; Release gives it back, after which each operation takes it for its own
// duration only — what a long-lived user does (Watch, between commits), so
// that other processes share the cache meanwhile.
type Host struct {
	cfg Config
	dir *cachefs.Dir
	log *slog.Logger
	fp  failpoints // empty unless built with -tags failpoints

	// db is the state database, open only while the cache is held (see
	// acquire); held counts the holds, base is Open's until Release.
	db   *statedb.DB
	rows stateRows // db's rows, read (see stateRows); nil when db is
	held int
	base func()
	// keepDir, set while a Rebuild starts the state over after damage, is
	// where it keeps the cache's files that differ from the ledger (damage.go).
	keepDir string
	// hwm is the last HWM this Host read or persisted, for readers on other
	// goroutines (heartbeats), which must not touch db.
	hwm atomic.Uint64
	// hashed counts the files whose content this Host read to hash them
	// (Hashed).
	hashed atomic.Int64
	// op is the running operation's watched ports (watching; nil: none).
	op *ports
}

// HWM returns the last high-water mark this Host read from its state or
// persisted: safe to call from any goroutine, while an operation runs. Another
// process's changes show once this Host next holds the cache.
func (h *Host) HWM() ledger.Seq { return ledger.Seq(h.hwm.Load()) }

// Hashed returns how many times this Host read a file of the cache to hash
// it since it was opened — its scans (Commit, Prepare) and PrepareFiles: what its
// pushes cost in reads of the cache. Safe to call from any goroutine.
func (h *Host) Hashed() int64 { return h.hashed.Load() }

// acquire takes the cache for one operation: it opens the state database,
// which locks the cache against other processes (waiting up to LockWait, then
// statedb.ErrLocked, or until ctx ends), unless this Host holds it already.
// release gives it back.
// Between operations a Host holds no lock, so other syncledger processes can
// use the cache — a commit or a status while watch runs.
func (h *Host) acquire(ctx context.Context) (release func(), err error) {
	if h.held == 0 {
		if h.db, err = statedb.OpenContext(ctx, h.dir.StatePath("state.db"), h.cfg.LockWait); err != nil {
			return nil, err
		}
		h.rows = h.db
		// Only the lock holder writes, so temp files seen now are a crashed run's.
		h.dir.RemoveTemp()
	}
	h.held++
	return func() {
		if h.held--; h.held == 0 {
			if err := h.db.Close(); err != nil {
				h.log.Warn("closing the state database", "err", err)
			}
			h.db, h.rows = nil, nil
		}
	}, nil
}

// Open opens the cache (creating its state database) for the ledger.
func Open(cfg Config) (*Host, error) {
	if !cfg.local && (cfg.Log == nil || cfg.Blobs == nil) {
		return nil, fmt.Errorf("open host: log and blob store are required: %w", ledger.ErrInvalid)
	}
	if cfg.Host == "" || len(cfg.Host) > ledger.MaxHostLen {
		return nil, fmt.Errorf("open host: host id must be 1-%d bytes: %w", ledger.MaxHostLen, ledger.ErrInvalid)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	if cfg.BatchEvents <= 0 {
		cfg.BatchEvents = 4096
	}
	if cfg.CommitPartitions <= 0 || cfg.CommitPartitions > ledger.MaxBatch {
		cfg.CommitPartitions = ledger.MaxBatch
	}
	if cfg.CommitHold <= 0 {
		cfg.CommitHold = DefaultCommitHold
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = 10 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	dir, err := cachefs.Open(cfg.Cache)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, dir: dir, log: lg}
	release, err := h.acquire(context.Background())
	if errors.Is(err, statedb.ErrCorrupt) {
		// Every operation fails with it but Rebuild, the way out (damage.go).
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	_, hwm, err := h.db.HWM()
	if err != nil {
		release()
		return nil, err
	}
	h.hwm.Store(uint64(hwm))
	h.base = release
	return h, nil
}

// OpenLocal opens the cache without its ledger (cfg.Log and cfg.Blobs are not
// used), for when the ledger cannot be reached: Status then reports what the
// cache alone knows (Status.Offline). Any other operation needs Open.
func OpenLocal(cfg Config) (*Host, error) {
	cfg.Log, cfg.Blobs, cfg.local = nil, nil, true
	return Open(cfg)
}

// Release gives the cache back to other processes until the next operation,
// which then takes it for its own duration only (see Host).
func (h *Host) Release() {
	if h.base != nil {
		h.base()
		h.base = nil
	}
}

// Close releases the cache.
func (h *Host) Close() error {
	h.Release()
	if h.held > 0 {
		// A bug of this process (Close while one of its operations runs), not
		// another process holding the cache: not statedb.ErrLocked.
		return errors.New("close host: an operation of this Host still holds the cache: close it after the operation returns")
	}
	return h.dir.Close()
}

// Dir returns the cache directory.
func (h *Host) Dir() *cachefs.Dir { return h.dir }

// View calls fn with the state database while holding the cache (read access
// for status and tests).
func (h *Host) View(fn func(*statedb.DB) error) error {
	release, err := h.acquire(context.Background())
	if err != nil {
		return err
	}
	defer release()
	return fn(h.db)
}

// session is a core over the state database with the local facts the shell
// keeps beside it. The core reads the marks and index rows it needs from the
// database (dbStorage); the shell reads the rows' local facts (mtime, seq)
// from it too, so nothing in a session grows with the index.
type session struct {
	core    *projector.Core
	journal map[string]statedb.JournalEntry // what interrupted applies left (see statedb.JournalEntry)
	info    ledger.Info
	// commits are the commit ids of the events staged since the last Ready
	// persisted, by seq: recorded beside the marks they move
	// (statedb.Commit, identity.go).
	commits map[ledger.Seq]string
	// checked: a commit of this session found the log's commit at the HWM
	// the one this cache applied (identity.go).
	checked bool
	// head is the log's head a full sync reads to, with its stamp in ID
	// (ledger.CommitLog.Head): recorded with the top commit when they meet.
	head statedb.Commit
}

// staged notes the commit of a record staged into the core (an event, not a
// record every reader skips).
func (s *session) staged(rec ledger.Record) {
	if rec.Skip != nil || rec.Event.Commit == "" {
		return
	}
	if s.commits == nil {
		s.commits = map[ledger.Seq]string{}
	}
	s.commits[rec.Seq] = rec.Event.Commit
}

// stateRows is how a Host reads the rows of its state database (index
// entries and marks), the reads whose cost may grow with the index: the core
// through projector.Storage (dbStorage), the shell through the lookups below.
// It is the database held (*statedb.DB); a test wraps it to count the rows
// an operation reads.
type stateRows interface {
	projector.Storage
	Get(path string) (statedb.Entry, bool, error)
	ForEachPrefix(prefix string, fn func(path string, e statedb.Entry) (bool, error)) error
	ForEachEntered(prefix string, enter func(dir string) bool, fn func(path string, e statedb.Entry) (bool, error)) error
	ForEach(fn func(path string, e statedb.Entry) error) error
	Load() (statedb.State, error)
}

// dbStorage is the core's projector.Storage: the state database this Host
// holds at the time of each read (a watch's session outlives one hold of the
// cache, and each hold opens the database again).
type dbStorage struct{ h *Host }

var errNotHeld = errors.New("the state database is read while the cache is not held: a bug of this process")

func (s dbStorage) db() (stateRows, error) {
	if s.h.rows == nil {
		return nil, errNotHeld
	}
	return s.h.rows, nil
}

func (s dbStorage) HardState() (string, ledger.Seq, error) {
	db, err := s.db()
	if err != nil {
		return "", 0, err
	}
	return db.HardState()
}

func (s dbStorage) Mark(p string) (projector.Mark, error) {
	db, err := s.db()
	if err != nil {
		return projector.Mark{}, err
	}
	return db.Mark(p)
}

func (s dbStorage) Marks(fn func(string, projector.Mark) bool) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	return db.Marks(fn)
}

func (s dbStorage) File(p string) (projector.File, bool, error) {
	db, err := s.db()
	if err != nil {
		return projector.File{}, false, err
	}
	return db.File(p)
}

func (s dbStorage) Under(dir string) (bool, error) {
	db, err := s.db()
	if err != nil {
		return false, err
	}
	return db.Under(dir)
}

func (s dbStorage) Files(prefix string, fn func(string, projector.File) bool) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	return db.Files(prefix, fn)
}

// load builds the core from the persisted state and binds it to the log's lineage.
func (h *Host) load(ctx context.Context, lazy bool) (*session, error) {
	info, err := h.logPort().Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read ledger info: %w", err)
	}
	s, err := h.loadLocal(lazy)
	if err != nil {
		return nil, err
	}
	if err := s.core.AdoptLineage(info); err != nil {
		return nil, err
	}
	s.info = info
	if s.core.HasReady() { // a new cache: persist the lineage it adopted
		rd, err := s.core.Ready()
		if err != nil {
			return nil, err
		}
		if _, err := h.applyReady(ctx, s, rd, nil); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// loadLocal opens a session over the cache's state whose core has not met the
// ledger yet: the core reads the lineage and HWM, and the marks and index
// rows as it needs them (dbStorage); the journal, which holds only what
// interrupted applies left, is read whole.
func (h *Host) loadLocal(lazy bool) (*session, error) {
	s := &session{}
	if keep, err := h.db.Recovering(); err != nil {
		return nil, err
	} else if keep != "" && h.keepDir == "" {
		return nil, h.errRecovering()
	}
	var err error
	if s.core, err = projector.New(dbStorage{h}, projector.Config{Lazy: lazy}); err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	h.hwm.Store(uint64(s.core.HWM()))
	if s.journal, err = h.db.Journal(); err != nil {
		return nil, fmt.Errorf("load journal: %w", err)
	}
	return s, nil
}

// checkLineage compares the persisted lineage with the log's without loading the state.
func (h *Host) checkLineage(ctx context.Context) (ledger.Info, string, ledger.Seq, error) {
	info, err := h.logPort().Info(ctx)
	if err != nil {
		return info, "", 0, fmt.Errorf("read ledger info: %w", err)
	}
	uuid, hwm, err := h.db.HWM()
	if err != nil {
		return info, "", 0, err
	}
	h.hwm.Store(uint64(hwm))
	if uuid != "" && uuid != info.UUID {
		return info, "", 0, fmt.Errorf("cache %s belongs to ledger %s, log %q is ledger %s: %w", h.dir.Root(), uuid, info.Name, info.UUID, ledger.ErrLineage)
	}
	return info, uuid, hwm, nil
}

package embedded

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// The disk watch (the package doc, "A full disk"; docs/ops.md, "A full disk").

// DefaultReserve is the free space the server keeps on its data directory's
// filesystem when Config.Reserve is 0: 64 MiB, or a tenth of a filesystem
// smaller than 640 MiB.
const DefaultReserve = 64 << 20

// DefaultDiskInterval is how often the free space is read when
// Config.DiskInterval is 0.
const DefaultDiskInterval = 250 * time.Millisecond

// broadcastEvery is how often a full server says so to its ledgers' clients.
const broadcastEvery = 500 * time.Millisecond

// restartBackoff is the least time between two restarts of JetStream: a disk
// that fails every write although statfs says it has room (a quota) is
// retried at that pace, not in a loop.
const restartBackoff = 10 * time.Second

// noStoreLimit is the store limit serve gives JetStream: none. nats-server
// would otherwise take 75% of the space free when it starts as its limit for
// good, and refuse writes past it however much space is freed later; the
// watch is the limit instead.
const noStoreLimit = math.MaxInt64 / 4

// diskWatch keeps JetStream off a full disk: below the reserve it closes the
// store (every write refused at once), at Resume it opens it again, and it
// restarts JetStream when a write already failed for lack of space (the store
// keeps such an error until it is reopened).
type diskWatch struct {
	s        *Server
	log      *slog.Logger
	interval time.Duration
	reserve  int64 // Config.Reserve; 0: DefaultReserve of the filesystem's size
	stat     func(dir string) (free, size uint64, noInodes bool, err error)

	stop, done chan struct{}

	mu          sync.Mutex
	state       ledger.ServerState
	saved       server.JetStreamAccountLimits // the limits the store had before it was closed
	lastRestart time.Time
	lastSaid    time.Time // the last broadcast
	nc          *nats.Conn
	ledgers     []string // the ledgers' names, as last listed
	statErr     string   // the last statfs error logged
}

// reserveFor returns the reserve and the resume level on a filesystem of
// size bytes.
func reserveFor(configured int64, size uint64) (reserve, resume uint64) {
	reserve = uint64(configured)
	if configured == 0 {
		reserve = min(DefaultReserve, size/10)
	}
	return reserve, reserve + reserve/2
}

func (s *Server) startDiskWatch() {
	w := &diskWatch{s: s, log: s.logger.With("component", "disk"), interval: s.cfg.DiskInterval, reserve: s.cfg.Reserve,
		stop: make(chan struct{}), done: make(chan struct{})}
	if w.interval <= 0 {
		w.interval = DefaultDiskInterval
	}
	if w.stat = s.cfg.statDisk; w.stat == nil {
		w.stat = fsx.DiskSpace
	}
	w.state.Dir = s.cfg.DataDir
	w.check()
	s.disk = w
	go w.run()
}

func (w *diskWatch) run() {
	defer close(w.done)
	t := time.NewTimer(w.next())
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.s.logs.noSpace:
		}
		w.check()
		t.Reset(w.next())
	}
}

// fastWrites is the write rate the watch assumes when the free space nears
// the reserve: it reads the free space again before writes at that rate could
// have used what is left above the reserve (at least every minInterval).
const (
	fastWrites  = 1 << 30 // bytes per second
	minInterval = 2 * time.Millisecond
)

// next is the time until the next check: the interval, or less as the free
// space nears the reserve.
func (w *diskWatch) next() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state
	if st.Full || st.Free <= st.Reserve {
		return w.interval
	}
	d := time.Duration(float64(st.Free-st.Reserve) / fastWrites * float64(time.Second))
	return min(max(d, minInterval), w.interval)
}

func (w *diskWatch) close() {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nc != nil {
		w.nc.Close()
	}
}

// State returns what the watch last saw.
func (w *diskWatch) State() ledger.ServerState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// check reads the free space and the store's health and acts on them.
func (w *diskWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns := w.s.ns
	free, size, noInodes, err := w.stat(w.state.Dir)
	if err != nil {
		if msg := err.Error(); msg != w.statErr {
			w.statErr = msg
			w.log.Warn("cannot read the data directory's free space: a full disk will not be noticed", "dir", w.state.Dir, "err", err)
		}
		return
	}
	w.statErr = ""
	st := &w.state
	st.Free, st.Size = free, size
	reserve, resume := reserveFor(w.reserve, size)
	st.Reserve, st.Resume = reserve, resume
	failed := w.s.logs.failedSinceStart()
	enabled := ns.JetStreamEnabled()
	if enabled {
		st.Stored = ns.GlobalAccount().JetStreamUsage().Store
	}
	now := time.Now()
	switch {
	case !st.Full && (free < reserve || noInodes || failed || !enabled):
		cause := "free space below the reserve"
		switch {
		case failed:
			cause = "a write failed for lack of space"
		case noInodes:
			cause = "no inode left on the filesystem"
		case !enabled:
			cause = "JetStream stopped"
		}
		if enabled {
			if err := w.closeStore(); err != nil {
				w.log.Error("cannot close the store to writes", "err", err)
				return
			}
		}
		st.Full, st.Since, st.Cause = true, now, cause
		w.lastSaid = time.Time{}
		w.log.Error("the server's disk is full: every write is refused until space is freed", "dir", st.Dir,
			"free", ledger.Bytes(free), "reserve", ledger.Bytes(reserve), "resume", ledger.Bytes(resume), "cause", cause)
	case st.Full && free >= resume && !noInodes:
		if (w.s.logs.failedSinceStart() || !enabled) && now.Sub(w.lastRestart) < restartBackoff {
			break
		}
		if err := w.openStore(enabled); err != nil {
			w.log.Error("cannot open the store to writes again", "err", err)
			return
		}
		st.Full, st.Since, st.Cause = false, now, ""
		w.log.Warn("the server's disk has room again: writes are taken", "dir", st.Dir, "free", ledger.Bytes(free))
		w.say(now)
		return
	}
	if st.Full && now.Sub(w.lastSaid) >= broadcastEvery {
		w.say(now)
	}
}

// closeStore refuses every write to the store from now on: the account's
// store limit is set to 0, so JetStream answers each publish at once with
// "resource limits exceeded for account" (err_code 10002), which clients map
// to ledger.ErrServerFull. Reads, and the deletes and purges that free space,
// go on.
func (w *diskWatch) closeStore() error {
	acc := w.s.ns.GlobalAccount()
	lim := acc.JetStreamUsage().Limits
	w.saved = lim
	lim.MaxStore = 0
	return acc.UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": lim})
}

// reclose refuses writes again after a reload of the server's options
// (SetUsers), which gives the account back the JetStream limits it started
// with: while the disk is full, the store limit goes back to 0; the limits
// saved for when it has room again stay as they were.
func (w *diskWatch) reclose() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.state.Full || !w.s.ns.JetStreamEnabled() {
		return nil
	}
	acc := w.s.ns.GlobalAccount()
	lim := acc.JetStreamUsage().Limits
	if lim.MaxStore == 0 {
		return nil
	}
	lim.MaxStore = 0
	return acc.UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": lim})
}

// openStore takes writes again: the store's limits as they were, or, when a
// write failed for lack of space since JetStream started (its store keeps
// that error until it is reopened) or JetStream stopped, JetStream restarted
// in this process: every stream reopened from disk with every acknowledged
// message, clients' connections kept.
func (w *diskWatch) openStore(enabled bool) error {
	if !w.s.logs.failedSinceStart() && enabled {
		return w.s.ns.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": w.saved})
	}
	w.lastRestart = time.Now()
	start := time.Now()
	ns := w.s.ns
	if enabled {
		if err := ns.ShutdownJetStream(); err != nil {
			return fmt.Errorf("stop JetStream: %w", err)
		}
	}
	w.s.logs.restarted()
	if err := ns.EnableJetStream(w.s.jsConfig()); err != nil {
		return fmt.Errorf("restart JetStream: %w", err)
	}
	w.log.Warn("restarted JetStream: its streams had failed to write for lack of space", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// say tells the ledgers' clients what the watch sees: one message on each
// ledger's server subject (natsjs.ServerSubject), which every role may
// subscribe to and only an admin may publish on. A full server says it every
// broadcastEvery; clients that were refused a write wait for it.
func (w *diskWatch) say(now time.Time) {
	w.lastSaid = now
	if w.nc == nil {
		nc, err := w.s.Connect(nats.Name("syncledger-serve-disk"))
		if err != nil {
			w.log.Warn("cannot tell clients of the disk", "err", err)
			return
		}
		w.nc = nc
	}
	if names, ok := w.s.ledgers(); ok {
		w.ledgers = names
	}
	b, err := json.Marshal(w.state)
	if err != nil {
		return
	}
	for _, name := range w.ledgers {
		_ = w.nc.Publish(natsjs.ServerSubject(name), b)
	}
	_ = w.nc.Flush()
}

// ledgers returns the names of the ledgers the server holds (from its
// streams); ok is false when JetStream cannot say (it is stopped).
func (s *Server) ledgers() (names []string, ok bool) {
	ad, err := s.ns.JszAccount(&server.JSzOptions{Account: s.ns.GlobalAccount().Name, Streams: true})
	if err != nil {
		return nil, false
	}
	prefix := ledger.StreamName("")
	for _, sd := range ad.Streams {
		if name, ok := strings.CutPrefix(sd.Name, prefix); ok && ledger.ValidateName(name) == nil {
			names = append(names, name)
		}
	}
	return names, true
}

// Disk returns what the server knows of its data directory's filesystem: free
// space, the reserve, whether it refuses writes. Its zero value when the
// watch is off (Config.Reserve < 0, or free space unreadable here).
func (s *Server) Disk() ledger.ServerState {
	if s.disk == nil {
		return ledger.ServerState{}
	}
	return s.disk.State()
}

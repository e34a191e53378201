package dirty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/syncledger/syncledger/ledger"
)

// watchMask is what the watcher asks inotify for on every directory.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// Config configures a Watcher.
type Config struct {
	// Root is the cache directory (required).
	Root string
	// Logger receives what makes the set untrusted; nil discards.
	Logger *slog.Logger
	// MaxPaths overrides the package's MaxPaths (tests).
	MaxPaths int
	// MaxDirs, when set, bounds the directories watched (the inotify watches
	// it takes from the user's fs.inotify.max_user_watches): a larger cache
	// makes the set untrusted for good.
	MaxDirs int
}

// Watcher keeps a cache's dirty set (see the package doc). Start it with Run.
type Watcher struct {
	root    string
	log     *slog.Logger
	max     int
	maxDirs int
	fd      int
	file    *os.File // fd, for reading
	epoch   string
	barrier string // absolute path of the barrier directory

	// paused, when set (tests), is waited on before each read of the inotify
	// queue: a test holds the reader to make the kernel's queue overflow.
	paused chan struct{}

	mu        sync.Mutex
	wds       map[int32]string // watch descriptor → directory, relative ("" = the root)
	barrierWD int32
	seq       uint64            // sequence number of the last event read
	paths     map[string]uint64 // path → seq of its last event
	trusted   bool              // a full scan was acked since lostAt
	lostAt    uint64            // seq at which the set last lost trust
	reason    string            // why the set is untrusted
	broken    string            // why it can never be trusted again (a directory not watched)
	markers   map[string]chan uint64
	nmarker   uint64
	closed    bool
	// linked: the files with more than one link (found when the set last
	// became trusted, or by an event naming one since): another name can
	// change them with no event here, so every snapshot lists them
	// (unseen.go). linking is closed when the search for them that trust
	// waits on is done; nil when none runs.
	linked  map[string]bool
	linking chan struct{}
}

// New sets up the inotify watches of the cache at cfg.Root (every directory but
// the state directory and the _index and _control trees) and the barrier
// directory. The set starts untrusted: nothing is known of what changed before.
func New(cfg Config) (*Watcher, error) {
	root, err := filepath.Abs(cfg.Root)
	if err == nil {
		root, err = filepath.EvalSymlinks(root) // the watches do not follow links
	}
	if err != nil {
		return nil, fmt.Errorf("dirty set: %w", err)
	}
	// Non-blocking, read through an os.File: the runtime's poller waits for
	// events, and Close wakes a read in progress (closing a descriptor does not
	// wake a blocked read(2)).
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("dirty set: inotify_init: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	w := &Watcher{
		root: root, log: cfg.Logger, max: cfg.MaxPaths, maxDirs: cfg.MaxDirs, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), epoch: hex.EncodeToString(id[:]),
		barrier: filepath.Join(root, ledger.StateDir, BarrierDir),
		wds:     map[int32]string{}, paths: map[string]uint64{}, markers: map[string]chan uint64{},
		reason: "the watcher has not seen a full scan since it started",
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.max <= 0 {
		w.max = MaxPaths
	}
	if err := os.MkdirAll(w.barrier, 0o755); err != nil {
		w.file.Close()
		return nil, fmt.Errorf("dirty set: %w", err)
	}
	bwd, err := unix.InotifyAddWatch(fd, w.barrier, unix.IN_CREATE|unix.IN_ONLYDIR)
	if err != nil {
		w.file.Close()
		return nil, fmt.Errorf("dirty set: watch %s: %w", w.barrier, err)
	}
	w.barrierWD = int32(bwd)
	w.mu.Lock()
	err = w.addTree("")
	w.mu.Unlock()
	if err != nil {
		w.file.Close()
		return nil, err
	}
	return w, nil
}

// excluded reports whether the directory rel is not watched.
func excluded(rel string) bool {
	return rel == ledger.StateDir || rel == "_index" || rel == "_control"
}

// addTree watches the directory rel and every directory below it (w.mu held). It
// adds the watch before it lists a directory, so a subdirectory made meanwhile
// is either listed or reported by an event. A watch that cannot be added makes
// the set untrusted; the error is returned only for the root.
func (w *Watcher) addTree(rel string) error {
	if w.maxDirs > 0 && len(w.wds) >= w.maxDirs {
		if w.broken == "" {
			w.broken = fmt.Sprintf("the cache has more than %d directories to watch", w.maxDirs)
			w.lose(w.broken)
		}
		return nil
	}
	abs := filepath.Join(w.root, filepath.FromSlash(rel))
	wd, err := unix.InotifyAddWatch(w.fd, abs, watchMask)
	if err != nil {
		if rel == "" {
			return fmt.Errorf("dirty set: watch %s: %w", abs, err)
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // gone (or replaced) already: its own event says so
		}
		w.broken = fmt.Sprintf("cannot watch %s: %v (raise fs.inotify.max_user_watches, and restart watch)", rel, err)
		w.lose(w.broken)
		return nil
	}
	w.wds[int32(wd)] = rel
	ents, err := os.ReadDir(abs)
	if err != nil {
		if rel == "" {
			return fmt.Errorf("dirty set: list %s: %w", abs, err)
		}
		return nil
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := e.Name()
		if rel != "" {
			sub = rel + "/" + sub
		}
		if excluded(sub) {
			continue
		}
		if err := w.addTree(sub); err != nil {
			return err
		}
	}
	return nil
}

// lose makes the set untrusted from the current event on (w.mu held).
func (w *Watcher) lose(reason string) {
	if w.trusted {
		w.log.Warn("dirty set untrusted until the next full scan", "reason", reason)
	}
	w.trusted, w.lostAt, w.reason = false, w.seq, reason
}

// mark records that rel may have changed (w.mu held).
func (w *Watcher) mark(rel string) {
	if rel == "" {
		return
	}
	if _, ok := w.paths[rel]; !ok && len(w.paths) >= w.max {
		clear(w.paths)
		w.lose(fmt.Sprintf("more than %d changed paths", w.max))
		return
	}
	w.paths[rel] = w.seq
}

// Run reads events until ctx is done or the watcher is closed, serving the
// socket meanwhile. It removes a stale socket; if another watcher answers on it,
// Run returns an error (one watcher per cache).
func (w *Watcher) Run(ctx context.Context) error {
	ln, err := w.listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		w.serve(ctx, ln)
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		ln.Close()
		w.Close()
	}()
	err = w.read(ctx)
	cancel()
	wg.Wait()
	_ = os.Remove(SocketPath(w.root))
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Watch reads events until ctx is done or the watcher is closed, as Run does,
// without the socket: for a process that keeps a set of its own for its own
// commits (the swamp agent), beside any watcher of the cache that serves one.
func (w *Watcher) Watch(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { w.Close() })
	defer stop()
	return w.read(ctx)
}

// Close stops the watcher: Run returns, pending snapshots fail.
func (w *Watcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	for name, ch := range w.markers {
		close(ch)
		delete(w.markers, name)
	}
	return w.file.Close() // wakes the read in progress
}

func (w *Watcher) listen() (net.Listener, error) {
	path := SocketPath(w.root)
	if c, err := NewClient(w.root).do(context.Background(), request{Op: "ping"}); err == nil || !errors.Is(err, ErrNoWatcher) {
		_ = c
		return nil, fmt.Errorf("dirty set: another watcher answers on %s", path)
	}
	_ = os.Remove(path)
	addr, done, err := sockAddr(path)
	if err != nil {
		return nil, fmt.Errorf("dirty set: %w", err)
	}
	defer done()
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("dirty set: listen on %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	// Only the cache's owner may ask or ack: an ack makes commits skip paths.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("dirty set: %w", err)
	}
	return ln, nil
}

func (w *Watcher) serve(ctx context.Context, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			var req request
			var resp response
			if err := json.NewDecoder(conn).Decode(&req); err != nil {
				return
			}
			switch req.Op {
			case "snapshot":
				sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				s, err := w.Snapshot(sctx)
				cancel()
				if err != nil {
					resp.Error = err.Error()
				}
				resp.Snapshot = s
			case "ack":
				w.Ack(req.Epoch, req.Seq, req.Full, req.Paths)
			case "untrust":
				w.Untrust(req.Reason)
			case "ping":
			default:
				resp.Error = fmt.Sprintf("unknown request %q", req.Op)
			}
			_ = json.NewEncoder(conn).Encode(resp)
		}()
	}
}

// Snapshot returns the set after a barrier: every change made before the call
// is in it (see the package doc).
func (w *Watcher) Snapshot(ctx context.Context) (*Snapshot, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, errors.New("watcher closed")
	}
	w.nmarker++
	name := "m" + strconv.FormatUint(w.nmarker, 10) + "-" + strconv.Itoa(os.Getpid())
	ch := make(chan uint64, 1)
	w.markers[name] = ch
	w.mu.Unlock()
	p := filepath.Join(w.barrier, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		err = f.Close()
	}
	defer os.Remove(p)
	var seq uint64
	if err == nil {
		select {
		case s, ok := <-ch:
			if !ok {
				err = errors.New("watcher closed")
			}
			seq = s
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	w.mu.Lock()
	delete(w.markers, name)
	if err == nil && w.linking != nil {
		err = w.waitLinked(ctx)
	}
	defer w.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("dirty set barrier: %w", err)
	}
	s := &Snapshot{Epoch: w.epoch, Seq: seq, Trusted: w.trusted}
	if !w.trusted {
		s.Reason = w.reason
		return s, nil
	}
	s.Paths = make([]string, 0, len(w.paths)+len(w.linked))
	for p := range w.paths {
		s.Paths = append(s.Paths, p)
	}
	// What inotify cannot see change is always checked (unseen.go).
	for p := range w.linked {
		s.Paths = append(s.Paths, p)
	}
	s.Paths = append(s.Paths, w.mountsUnder()...)
	slices.Sort(s.Paths)
	s.Paths = slices.Compact(s.Paths)
	return s, nil
}

// Ack records that a commit covered paths as of the snapshot (epoch, seq): each
// one whose last event is not after seq is forgotten. full means the commit
// scanned the whole cache after that snapshot: every path is covered, and the
// set becomes trusted unless it lost trust after seq. An ack of another epoch
// (a watcher that ran before) is ignored.
func (w *Watcher) Ack(epoch string, seq uint64, full bool, paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if epoch != w.epoch {
		return
	}
	if full {
		for p, s := range w.paths {
			if s <= seq {
				delete(w.paths, p)
			}
		}
		if !w.trusted && w.lostAt < seq && w.broken == "" && w.linking == nil {
			// Trusted once the files with several links are known (unseen.go).
			w.linking = make(chan struct{})
			go w.findLinked(seq, w.linking)
		}
		return
	}
	for _, p := range paths {
		if s, ok := w.paths[p]; ok && s <= seq {
			delete(w.paths, p)
		}
	}
}

// Untrust makes the set untrusted until a full scan whose snapshot comes after
// this call is acked.
func (w *Watcher) Untrust(reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if reason == "" {
		reason = "told to"
	}
	w.lose(reason)
}

// Len returns the number of paths in the set.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.paths)
}

// read reads and records events until the descriptor is closed.
func (w *Watcher) read(ctx context.Context) error {
	buf := make([]byte, 64<<10)
	for {
		w.mu.Lock()
		paused := w.paused
		w.mu.Unlock()
		if paused != nil {
			select {
			case <-paused:
			case <-ctx.Done():
				return nil
			}
		}
		n, err := w.file.Read(buf)
		if err != nil {
			w.mu.Lock()
			closed := w.closed
			w.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("dirty set: read inotify events: %w", err)
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			name := strings.TrimRight(string(nameBytes), "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.event(ev.Wd, ev.Mask, name)
		}
		w.mu.Unlock()
	}
}

// event records one inotify event (w.mu held).
func (w *Watcher) event(wd int32, mask uint32, name string) {
	w.seq++
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.lose("the kernel's inotify queue overflowed (events were lost)")
		// A marker's own event may be among the lost: answer every pending
		// snapshot now (untrusted, so no barrier is needed).
		for name, ch := range w.markers {
			ch <- w.seq
			delete(w.markers, name)
		}
		return
	}
	if wd == w.barrierWD {
		if ch, ok := w.markers[name]; ok {
			ch <- w.seq
			delete(w.markers, name)
		}
		return
	}
	dir, ok := w.wds[wd]
	if !ok {
		return // a watch removed meanwhile
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.wds, wd)
		return
	}
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		if dir == "" {
			w.lose("the cache directory itself was moved or deleted")
		}
		return // the parent's event names the path
	}
	rel := name
	if dir != "" {
		rel = dir + "/" + name
	}
	isDir := mask&unix.IN_ISDIR != 0
	if isDir && excluded(rel) {
		return
	}
	if dir == "" && (name == ledger.StateDir || name == "_index" || name == "_control") {
		return
	}
	if name == "" {
		return // an event on the directory itself: its parent's names it
	}
	if isDir && mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) == 0 {
		return // a directory's mode or times: no file's content
	}
	w.mark(rel)
	if !isDir && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		w.checkLinks(rel)
	}
	switch {
	case isDir && mask&unix.IN_MOVED_TO != 0:
		// Its files arrived without an event each.
		w.lose("directory " + rel + " was moved into the cache")
		_ = w.addTree(rel)
	case isDir && mask&unix.IN_MOVED_FROM != 0:
		// Its watches now follow it elsewhere, under a stale name.
		w.lose("directory " + rel + " was moved")
		w.dropTree(rel)
	case isDir && mask&unix.IN_CREATE != 0:
		// Files made in it before its watch was added have no event: mark what
		// is there once the watch is on (the commit checks the rest).
		_ = w.addTree(rel)
		w.markTree(rel)
	}
}

// dropTree removes the watches of rel and below (w.mu held).
func (w *Watcher) dropTree(rel string) {
	for wd, d := range w.wds {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.wds, wd)
		}
	}
}

// markTree marks every path below the directory rel (w.mu held).
func (w *Watcher) markTree(rel string) {
	_ = filepath.WalkDir(filepath.Join(w.root, filepath.FromSlash(rel)), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		r, rerr := filepath.Rel(w.root, p)
		if rerr == nil {
			w.mark(filepath.ToSlash(r))
			if !e.IsDir() {
				w.checkLinks(filepath.ToSlash(r)) // made before its watch: no event of its own
			}
		}
		return nil
	})
}

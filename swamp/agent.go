package swamp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/cachefs"
	"github.com/syncledger/syncledger/projector/dirty"
	"github.com/syncledger/syncledger/projector/host"
)

// Protocol is the version of the agent's JSON-lines protocol; the extension
// (extension/syncledger.ts, PROTOCOL) must speak the same one.
const Protocol = 1

// Agent serves one swamp process: the @syncledger/datastore extension starts
// `syncledger swamp agent` once per swamp command and sends it requests, one
// JSON object a line on stdin; each answer is one line on stdout carrying the
// request's id. Requests run concurrently (a lock wait does not hold up a
// sync); the cache operations run one at a time.
//
// The agent connects to the ledger and opens the cache as soon as it starts,
// while swamp is still busy with its own start, so that swamp's first calls
// find them open; a failure there is reported by the first call that needs
// them.
//
// A "hint" (swamp's markDirty path, sent as swamp writes) gets no answer.
// swamp sends it just before it writes there, so the next hint (or the push)
// says that write is done: the agent then hashes the files below the previous
// hint's path, uploads their content and fsyncs them in the background, while
// swamp carries on, so that the push finds that work done. Nothing is
// published or recorded from a hint: the push still scans the cache, uploads
// what is not stored and fsyncs every file it commits (an fsync of a file
// already synced costs little).
//
// The agent keeps a dirty set of the cache as `syncledger watch` does
// (package dirty, inotify), for itself: after each pull it scans the cache
// whole in the background, while swamp runs the command, and a push then
// checks only the paths found changed there and those the set saw change
// since (plus the hints). Where it has no set (not Linux, inotify limits), a
// push scans the whole cache.
type Agent struct {
	Version string // the binary's version; hello answers with it
	Cache   string // for messages
	// Globals are the global flags that point a syncledger command at this
	// cache and ledger ("--nats URL --ledger NAME --cache DIR"), for the
	// commands messages name.
	Globals string
	Host    func(context.Context) (*host.Host, error)
	// Blobs opens the ledger's blob store (verify checks it answers).
	Blobs func(context.Context) (ledger.BlobStore, error)
	// Changed, when set, returns the paths a commit may limit its scan to
	// (host.CommitOptions.Changed: nil scans the whole cache) — a running
	// watch's dirty set plus hints, swamp's markDirty paths — and done, to call
	// after a commit that succeeded. Hints alone are never trusted.
	Changed func(ctx context.Context, hints []string) (changed []string, done func())
	// Trace, when set, receives one JSON line per answered request: its op,
	// when it arrived (Unix ms) and how long it took
	// ({"op":"pull","at":1796146563.1,"ms":2.1,"ok":true}); B10 uses it.
	Trace io.Writer
	// KV opens the swamp bucket (Bucket) of the datastore's ledger (for a
	// namespace, the base ledger's: see NamespaceLedger).
	KV func(context.Context) (jetstream.KeyValue, error)
	// Namespace is the datastore's namespace ("" none): the cache (Host) is
	// its ledger's, and swamp's paths, NS/…, are the cache's paths under NS/.
	Namespace string
	// Foreign opens a read-only cache of another namespace's ledger (lazy:
	// content is fetched on demand), for swamp's foreign catalogs and
	// content; ledger.ErrNotFound when that namespace has no ledger. The
	// agent never commits from it.
	Foreign func(ctx context.Context, ns string) (*host.Host, error)

	hostMu sync.Mutex // one cache operation at a time
	h      *host.Host
	stored map[ledger.Digest]bool
	// prepared is the last prepare's changed paths, for the commit right after
	// it (nil: no prepare since the last commit).
	prepared []string

	kvOnce sync.Once
	kv     jetstream.KeyValue
	kvErr  error
	locks  *Locks

	hintMu    sync.Mutex
	hintLast  []string      // the last hint's paths, not written yet when it came
	hintDone  chan struct{} // closed once the work of the hints before it is done (nil: none)
	hintSince time.Time     // a hint's work leaves out files older than this
	baseDone  chan struct{} // closed once the scan after the last pull is done (nil: none)

	// Under hostMu: the agent's own dirty set (nil: none), and the scan
	// after the last pull: the changed paths it found, and the set's snapshot
	// it followed (nil: no such scan, or it failed).
	watch    *dirty.Watcher
	base     []string
	baseSnap *dirty.Snapshot

	foreignMu sync.Mutex
	foreign   map[string]*host.Host
}

// Request is one call from the extension.
type Request struct {
	ID           int64    `json:"id"`
	Op           string   `json:"op"`
	Protocol     int      `json:"protocol,omitempty"`     // hello
	Repo         string   `json:"repo,omitempty"`         // hello: the swamp repo, for messages
	MetadataOnly bool     `json:"metadataOnly,omitempty"` // pull
	Path         string   `json:"path,omitempty"`         // hydrate
	Hints        []string `json:"hints,omitempty"`        // push, commit, hint: markDirty paths
	// lock.*
	Key       string    `json:"key,omitempty"`
	Holder    *LockInfo `json:"holder,omitempty"`
	TTLMs     int64     `json:"ttlMs,omitempty"`
	RetryMs   int64     `json:"retryMs,omitempty"`
	MaxWaitMs int64     `json:"maxWaitMs,omitempty"`
	Nonce     string    `json:"nonce,omitempty"`
	// cp.*, namespaces
	Data       []byte   `json:"data,omitempty"`
	Prefix     string   `json:"prefix,omitempty"`
	Namespace  string   `json:"namespace,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"` // foreign.catalogs
	RepoID     string   `json:"repoId,omitempty"`
}

// Response answers one Request.
type Response struct {
	ID     int64  `json:"id"`
	Result any    `json:"result,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Error is a failed request: Message says what to do; Kind is "conflict",
// "version", "unreachable", "no-ledger" or "error"; Paths names the files
// concerned.
type Error struct {
	Kind    string   `json:"kind"`
	Message string   `json:"message"`
	Paths   []string `json:"paths,omitempty"`
}

// Serve answers requests from r on w until r ends or ctx is done; requests
// still running then are cancelled. Locks still held are not released: they
// expire after their TTL, as they would had the process died (swamp releases
// its locks itself when it ends normally).
func (a *Agent) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	// swamp awaits every call before it exits: a request still running when
	// its input ends (swamp killed) is abandoned, a lock wait first.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wmu sync.Mutex
		wg  sync.WaitGroup
		enc = json.NewEncoder(w)
	)
	reply := func(resp Response) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = enc.Encode(resp)
	}
	trace := func(op string, t0 time.Time, err error) {
		if a.Trace != nil {
			wmu.Lock()
			fmt.Fprintf(a.Trace, "{\"op\":%q,\"at\":%.3f,\"ms\":%.3f,\"ok\":%v}\n", op, float64(t0.UnixMicro())/1000, float64(time.Since(t0))/float64(time.Millisecond), err == nil)
			wmu.Unlock()
		}
	}
	// The hints are swamp's writes of this command: older files are not theirs
	// (a data directory holds every version), with some slack for the coarse
	// clock of file times.
	a.hintSince = time.Now().Add(-100 * time.Millisecond)
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.open(ctx)
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			reply(Response{Error: &Error{Kind: "error", Message: "bad request: " + err.Error()}})
			continue
		}
		req.Hints = a.own(req.Hints)
		if req.Op == "hint" {
			// Taken here, before the next request is read: a push sent after
			// it waits for its work.
			a.hint(ctx, req.Hints)
			trace(req.Op, time.Now(), nil)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			res, err := a.handle(ctx, req)
			resp := Response{ID: req.ID, Result: res}
			if err != nil {
				resp.Result, resp.Error = nil, a.describe(err)
			}
			reply(resp)
			trace(req.Op, t0, err)
		}()
	}
	cancel()
	wg.Wait()
	a.hinted()
	a.scanned()
	if a.watch != nil {
		a.watch.Close()
	}
	if a.locks != nil {
		a.locks.Close()
	}
	return sc.Err()
}

// checkProtocol accepts an extension that speaks this binary's protocol,
// whatever release wrote it; otherwise it says which command fixes it.
func checkProtocol(protocol int, repo, version string) error {
	if repo == "" {
		repo = "DIR"
	}
	switch {
	case protocol == Protocol:
		return nil
	case protocol > Protocol:
		return &versionError{fmt.Sprintf("the @syncledger/datastore extension in %s speaks agent protocol %d, newer than this syncledger binary's (%s: protocol %d): "+
			"install a newer syncledger on this host (one that speaks protocol %d); or, to take every host back to this binary's protocol, "+
			"run 'syncledger swamp setup --repo %s' with this binary and commit the extension it writes", repo, protocol, version, Protocol, protocol, repo)}
	default:
		return &versionError{fmt.Sprintf("the @syncledger/datastore extension in %s speaks agent protocol %d, older than this syncledger binary's (%s: protocol %d): "+
			"run 'syncledger swamp setup --repo %s' with this binary to rewrite the extension, and commit it for the other hosts", repo, protocol, version, Protocol, repo)}
	}
}

func (a *Agent) handle(ctx context.Context, req Request) (any, error) {
	switch req.Op {
	case "hello":
		if err := checkProtocol(req.Protocol, req.Repo, a.Version); err != nil {
			return nil, err
		}
		return map[string]any{"version": a.Version, "protocol": Protocol, "cache": a.Cache}, nil
	case "pull", "push", "prepare", "commit", "hydrate", "verify":
		if req.Namespace != a.Namespace {
			return nil, fmt.Errorf("swamp's datastore namespace is %q, but this datastore's syncledger config is for %q: run 'syncledger swamp setup --repo DIR --namespace %s' (it rewrites the config)", req.Namespace, a.Namespace, req.Namespace)
		}
		return a.cacheOp(ctx, req)
	case "foreign.catalogs", "foreign.content":
		return a.foreignOp(ctx, req)
	case "lock.acquire", "lock.release", "lock.inspect", "lock.forceRelease":
		return a.lockOp(ctx, req)
	case "cp.put", "cp.get", "cp.delete", "cp.list", "cp.putIfAbsent", "ns.register", "ns.list":
		kv, err := a.bucket(ctx)
		if err != nil {
			return nil, err
		}
		c := Control{kv}
		switch req.Op {
		case "cp.put":
			return true, c.Put(ctx, req.Key, req.Data)
		case "cp.get":
			return c.Get(ctx, req.Key)
		case "cp.delete":
			return true, c.Delete(ctx, req.Key)
		case "cp.list":
			return c.List(ctx, req.Prefix)
		case "cp.putIfAbsent":
			return c.PutIfAbsent(ctx, req.Key, req.Data)
		case "ns.register":
			return true, RegisterNamespace(ctx, kv, req.Namespace, req.RepoID)
		default:
			return ListNamespaces(ctx, kv)
		}
	}
	return nil, fmt.Errorf("unknown request %q", req.Op)
}

// PullResult answers pull: Files is what swamp reports as pulled.
type PullResult struct {
	Files int        `json:"files"`
	HWM   ledger.Seq `json:"hwm"`
	Head  ledger.Seq `json:"head"`
}

// PushResult answers push and commit.
type PushResult struct {
	Files  int    `json:"files"`
	Commit string `json:"commit,omitempty"` // the last commit published
	// Commits lists every commit published: more than one when the push
	// touched more partitions than one atomic commit holds (host.Commit).
	Commits []string   `json:"commits,omitempty"`
	HWM     ledger.Seq `json:"hwm"`
	Hints   int        `json:"hints"` // markDirty paths the extension sent
}

// open connects to the ledger's bucket and opens the cache (Agent); errors
// are left to the calls that need them.
func (a *Agent) open(ctx context.Context) {
	_, _ = a.bucket(ctx)
	a.hostMu.Lock()
	defer a.hostMu.Unlock()
	h, err := a.host(ctx)
	if err != nil {
		return
	}
	root := h.Dir().Root()
	if _, err := os.Stat(dirty.SocketPath(root)); err == nil {
		return // a `syncledger watch` keeps the set (Changed)
	}
	if w, err := dirty.New(dirty.Config{Root: root, MaxDirs: maxWatchedDirs}); err == nil {
		a.watch = w
		go func() { _ = w.Watch(ctx) }()
	}
}

// maxWatchedDirs bounds the inotify watches an agent takes (one a directory
// of the cache, from the user's fs.inotify.max_user_watches): past it, pushes
// scan the whole cache.
const maxWatchedDirs = 20000

// scanAfterPull starts the scan of the whole cache that follows a pull
// (Agent), under hostMu.
func (a *Agent) scanAfterPull(ctx context.Context) {
	a.base, a.baseSnap = nil, nil
	if a.watch == nil {
		return
	}
	done := make(chan struct{})
	a.hintMu.Lock()
	prev := a.baseDone
	a.baseDone = done
	a.hintMu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev // in order: the last pull's scan is the last to set base
		}
		a.hostMu.Lock()
		defer a.hostMu.Unlock()
		snap, err := a.watch.Snapshot(ctx)
		if err != nil {
			return
		}
		// Local changes found here are uploaded, as a prepare does.
		res, err := a.h.Prepare(ctx, nil, nil)
		if err != nil {
			return
		}
		a.watch.Ack(snap.Epoch, snap.Seq, true, nil)
		a.base, a.baseSnap = append([]string{}, res.Paths...), snap
	}()
}

// scanned waits for the scan after the last pull, if one runs.
func (a *Agent) scanned() {
	a.hintMu.Lock()
	done := a.baseDone
	a.hintMu.Unlock()
	if done != nil {
		<-done
	}
}

// host returns the open cache, opening it if it is not (under hostMu).
func (a *Agent) host(ctx context.Context) (*host.Host, error) {
	if a.h == nil {
		h, err := a.Host(ctx)
		if err != nil {
			return nil, err
		}
		// Between operations the cache is free for other processes (another
		// swamp command of this repo, a status).
		h.Release()
		a.h = h
	}
	return a.h, nil
}

// hint takes a markDirty hint (Agent) and starts the work of the one before
// it: the content of the files at or below its paths that changed since the
// agent started goes to the blob store, and the files are fsynced. Failures
// are left for the push to meet.
func (a *Agent) hint(ctx context.Context, next []string) {
	a.hintMu.Lock()
	paths := a.hintLast
	a.hintLast = next
	if paths == nil {
		a.hintMu.Unlock()
		return
	}
	prev, done := a.hintDone, make(chan struct{})
	a.hintDone = done
	a.hintMu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev // one hint at a time, in order
		}
		a.hostMu.Lock()
		h, err := a.host(ctx)
		a.hostMu.Unlock()
		if err != nil {
			return
		}
		blobs, err := a.Blobs(ctx)
		if err != nil {
			return
		}
		dir := h.Dir()
		ign, err := dir.Ignore()
		if err != nil {
			return
		}
		var files []string
		_ = dir.ScanPaths(ign, paths, func(rel string, fi cachefs.FileInfo) error {
			if fi.ModTime.After(a.hintSince) {
				files = append(files, rel)
			}
			return nil
		}, func(cachefs.Skipped) {})
		var g errgroup.Group
		g.SetLimit(8)
		for _, rel := range files {
			g.Go(func() error {
				d, n, err := dir.Hash(rel)
				if err != nil {
					return nil
				}
				f, err := dir.Open(rel)
				if err != nil {
					return nil
				}
				defer f.Close()
				_ = blobs.Put(ctx, d, f, n) // verified: a file rewritten meanwhile fails
				return nil
			})
		}
		_ = g.Wait()
		_ = dir.Flush(files, nil, 8)
	}()
}

// hinted waits until the work of the hints so far is done, and drops the last
// one (its write is the push's to find).
func (a *Agent) hinted() {
	a.hintMu.Lock()
	last := a.hintDone
	a.hintLast = nil
	a.hintMu.Unlock()
	if last != nil {
		<-last
	}
}

func (a *Agent) cacheOp(ctx context.Context, req Request) (any, error) {
	if req.Op == "prepare" || req.Op == "push" || req.Op == "commit" {
		a.hinted() // rather than doing the hints' work twice
		a.scanned()
	}
	a.hostMu.Lock()
	defer a.hostMu.Unlock()
	h, err := a.host(ctx)
	if err != nil {
		return nil, err
	}
	switch req.Op {
	case "pull":
		// Always a full sync: a per-model pull names only the models a command
		// locks, not those it reads (swamp-club#3193).
		res, err := h.Sync(ctx, host.SyncOptions{Lazy: req.MetadataOnly})
		if err == nil {
			a.scanAfterPull(ctx)
		}
		return PullResult{Files: res.Written + res.Deleted, HWM: res.HWM, Head: res.Head}, err
	case "prepare":
		changed, _ := a.changed(ctx, req.Hints)
		res, err := h.Prepare(ctx, nil, changed)
		if err != nil {
			return nil, err
		}
		a.stored = res.Stored
		a.prepared = append(make([]string, 0, len(res.Paths)), res.Paths...)
		return map[string]any{"files": res.Files, "bytes": res.Bytes}, nil
	case "push", "commit":
		stored, prepared := a.stored, a.prepared
		a.stored, a.prepared = nil, nil
		var (
			changed []string
			done    = func() {}
		)
		if prepared != nil && req.Op == "commit" {
			// swamp's commitPush follows its preparePush with no write in
			// between (it holds the model locks): the paths the prepare found
			// are what changed, and the commit need not look further. (A file
			// changed outside swamp meanwhile is committed by the next push.)
			// No dirty set is acked for this narrower check.
			changed = prepared
		} else {
			changed, done = a.changed(ctx, req.Hints)
		}
		res, err := h.Commit(ctx, host.CommitOptions{Message: "swamp " + req.Op, Stored: stored, Changed: changed})
		if err == nil {
			done()
		}
		ids := make([]string, len(res.Commits))
		for i, c := range res.Commits {
			ids[i] = c.Commit
		}
		return PushResult{Files: res.Written + res.Deleted, Commit: res.Commit, Commits: ids, HWM: res.HWM, Hints: len(req.Hints)}, err
	case "hydrate":
		paths := a.own([]string{req.Path})
		if len(paths) == 0 {
			return false, nil // not this datastore's path
		}
		res, err := h.Fetch(ctx, paths)
		if errors.Is(err, ledger.ErrNotFound) {
			return false, nil
		}
		return err == nil && res.Written > 0, err
	default: // verify: the stream answers, the lineage is this cache's, the blob store answers
		st, err := h.Status(ctx)
		if err != nil {
			return nil, err
		}
		bl, err := a.Blobs(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := bl.Stat(ctx, ledger.DigestOf(nil)); err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		return map[string]any{"head": st.Head, "hwm": st.HWM, "ledger": st.Ledger, "uuid": st.UUID,
			"cache": st.Cache, "dirty": len(st.Dirty), "files": st.Files}, nil
	}
}

// own turns swamp's paths into the cache's: with a namespace, swamp's NS/…
// are the cache's …; its paths elsewhere are not this datastore's.
func (a *Agent) own(paths []string) []string {
	if a.Namespace == "" || paths == nil {
		return paths
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, a.Namespace+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// foreignOp reads other namespaces' ledgers, read only: the catalog each
// exports (NS/.catalog-export.json, its rows; a namespace with no ledger or
// no export yet is left out) or one file's content (nil when absent).
func (a *Agent) foreignOp(ctx context.Context, req Request) (any, error) {
	if a.Foreign == nil {
		return nil, errors.New("this agent reads no other namespace")
	}
	a.foreignMu.Lock()
	defer a.foreignMu.Unlock()
	if req.Op == "foreign.catalogs" {
		out := []ForeignCatalog{}
		for _, ns := range req.Namespaces {
			b, err := a.foreignFile(ctx, ns, ".catalog-export.json")
			if err != nil {
				return nil, err
			}
			if b != nil && json.Valid(b) && bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
				out = append(out, ForeignCatalog{Namespace: ns, Rows: b})
			}
		}
		return out, nil
	}
	if err := ledger.ValidatePath(req.Path); err != nil {
		return nil, fmt.Errorf("foreign content %q: %w", req.Path, err)
	}
	b, err := a.foreignFile(ctx, req.Namespace, req.Path)
	if b == nil || err != nil {
		return nil, err
	}
	return b, nil
}

// foreignFile returns path's content in namespace ns's ledger as of now
// (nil: no such file, or no such namespace), under foreignMu.
func (a *Agent) foreignFile(ctx context.Context, ns, path string) ([]byte, error) {
	if ns == a.Namespace {
		return nil, fmt.Errorf("namespace %q is this datastore's own, not a foreign one", ns)
	}
	h, ok := a.foreign[ns]
	if !ok {
		var err error
		h, err = a.Foreign(ctx, ns)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
		h.Release()
		if a.foreign == nil {
			a.foreign = map[string]*host.Host{}
		}
		a.foreign[ns] = h
		if _, err := h.Sync(ctx, host.SyncOptions{Lazy: true}); err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", ns, err)
		}
	}
	// The file's content, fetched if the sync left it lazy.
	_, err := h.Fetch(ctx, []string{path})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns, err)
	}
	b, err := os.ReadFile(filepath.Join(h.Dir().Root(), filepath.FromSlash(path)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// changed is Changed: the paths a push checks (nil: all) and what to call
// once it committed them.
//
// Without it, or where it scans the whole cache, the agent's own dirty set
// (Agent) gives the paths changed since the scan after the last pull
// (without the hints: the set saw those writes), and done acks them to it;
// with no such scan, nil (scan the whole cache). Under hostMu.
func (a *Agent) changed(ctx context.Context, hints []string) ([]string, func()) {
	scanAll := func() {}
	if a.Changed != nil {
		changed, done := a.Changed(ctx, hints)
		if changed != nil {
			return changed, done
		}
		scanAll = done // acks a full scan to a cache's watch, if one answered
	}
	if a.baseSnap == nil {
		return nil, scanAll
	}
	snap, err := a.watch.Snapshot(ctx)
	if err != nil || !snap.Trusted || snap.Epoch != a.baseSnap.Epoch {
		return nil, scanAll
	}
	// The set saw swamp's writes too: the hints (data directories holding
	// every version) would only add files to check.
	changed := dirty.Merge(snap.Paths, a.base)
	return changed, func() {
		a.watch.Ack(snap.Epoch, snap.Seq, false, changed)
		a.base = nil
	}
}

func (a *Agent) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	a.kvOnce.Do(func() {
		a.kv, a.kvErr = a.KV(ctx)
		if a.kvErr == nil {
			a.locks = NewLocks(a.kv)
		}
	})
	return a.kv, a.kvErr
}

func (a *Agent) lockOp(ctx context.Context, req Request) (any, error) {
	if _, err := a.bucket(ctx); err != nil {
		return nil, err
	}
	switch req.Op {
	case "lock.acquire":
		if req.Holder == nil {
			return nil, errors.New("lock.acquire: no holder")
		}
		err := a.locks.Acquire(ctx, req.Key, *req.Holder, ms(req.TTLMs), ms(req.RetryMs), ms(req.MaxWaitMs))
		return true, err
	case "lock.release":
		return true, a.locks.Release(ctx, req.Key)
	case "lock.inspect":
		return a.locks.Inspect(ctx, req.Key)
	default:
		return a.locks.ForceRelease(ctx, req.Key, req.Nonce)
	}
}

// command is a syncledger command line of the host package with Globals, to
// be run from anywhere.
func (a *Agent) command(cmd string) string {
	rest, ok := strings.CutPrefix(cmd, "syncledger ")
	if !ok || a.Globals == "" {
		return cmd
	}
	return "syncledger " + a.Globals + " " + rest
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

type versionError struct{ msg string }

func (e *versionError) Error() string { return e.msg }

// describe turns err into the answer's error, with what to do about it.
func (a *Agent) describe(err error) *Error {
	var (
		ce *host.ConflictError
		le *host.LocalChangesError
		ve *versionError
	)
	switch {
	case errors.As(err, &ve):
		return &Error{Kind: "version", Message: ve.msg}
	case errors.As(err, &ce):
		return &Error{Kind: "conflict", Paths: ce.Paths, Message: fmt.Sprintf(
			"syncledger: another host changed %s too; this host's files are kept, uncommitted. Keep this host's version: %s; or the other host's: %s",
			strings.Join(ce.Paths, ", "), a.command(ce.Commands()[0]), a.command(ce.Commands()[1]))}
	case errors.As(err, &le):
		cmds := le.Commands()
		return &Error{Kind: "conflict", Paths: le.Paths, Message: fmt.Sprintf(
			"syncledger: files changed here, not pushed, that the ledger changed too: %s. Keep this host's version: %s; or the ledger's: %s",
			strings.Join(le.Paths, ", "), a.command(cmds[1]), a.command(cmds[2]))}
	case errors.Is(err, ledger.ErrNotFound):
		return &Error{Kind: "no-ledger", Message: fmt.Sprintf("syncledger: %v (create the ledger with 'syncledger init', or fix \"ledger\" in the datastore config of .swamp.yaml)", err)}
	}
	msg := err.Error()
	if strings.Contains(msg, "no servers available") || strings.Contains(msg, "connection refused") || strings.Contains(msg, "connect to NATS") {
		return &Error{Kind: "unreachable", Message: "syncledger: cannot reach NATS: " + msg + " (the server is \"nats\" in the datastore config of .swamp.yaml)"}
	}
	return &Error{Kind: "error", Message: "syncledger: " + msg}
}

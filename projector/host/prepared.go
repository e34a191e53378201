package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/cachefs"
)

// Prepared is the work done on a cache's changed files ahead of a push — by
// a Prepare, by PrepareFiles (swamp's hints), by an earlier push — for the
// push to take rather than do again (CommitOptions.Prepared,
// PrepareOptions.Prepared): each file's digest, with the file as it was
// when it was read (its stat: the same file, not one renamed over it, its
// size, mtime, mode and, where the system keeps it, ctime), and which
// content is stored. A scan given it reads no file whose stat is still the
// one it was read with: that digest is the file's content. A file changed
// since — written, replaced, its mode or times set — is read and hashed
// again, so a push publishes the content on disk when it scans, as
// without it.
//
// A digest is kept only when the file's stat was older than the read by
// more than the file system's timestamp granularity could hide (stampLag;
// git's "racy clean" entries): a write after the read then always moves
// the file's mtime or ctime. Prepare and PrepareFiles wait that long for a
// file just written before they read it (Linux: a clock tick and a
// millisecond, 2–11 ms; elsewhere 20 ms), so that their work is kept; a scan without one keeps what it can. A file system whose
// clock is not this machine's (a network file system on another's) may
// lag more: its files' digests are kept on the same terms, as the index
// keeps their stat.
//
// A nil *Prepared holds nothing. It is safe for concurrent use, and holds
// at most DefaultCommitHold files (past that, nothing more is kept).
type Prepared struct {
	mu     sync.Mutex
	files  map[string]preparedFile
	stored map[ledger.Digest]bool
	// reading holds the paths being read (hold): a second reader of one
	// (the scan after a pull, beside a hint's work) waits for the first and
	// takes its digest.
	reading map[string]*pathHold
}

// pathHold is a path being read, and how many wait for it.
type pathHold struct {
	mu sync.Mutex
	n  int
}

// preparedFile is a file's digest (Entry: its SHA256 and Size) and the stat
// it was read with.
type preparedFile struct {
	stat fs.FileInfo
	e    ledger.Entry
}

// NewPrepared returns an empty Prepared.
func NewPrepared() *Prepared {
	return &Prepared{files: map[string]preparedFile{}, stored: map[ledger.Digest]bool{}, reading: map[string]*pathHold{}}
}

// hold takes rel for one reader, waiting while another reads it; the
// returned func gives it back.
func (p *Prepared) hold(rel string) func() {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	ph := p.reading[rel]
	if ph == nil {
		ph = &pathHold{}
		p.reading[rel] = ph
	}
	ph.n++
	p.mu.Unlock()
	ph.mu.Lock()
	return func() {
		ph.mu.Unlock()
		p.mu.Lock()
		if ph.n--; ph.n == 0 {
			delete(p.reading, rel)
		}
		p.mu.Unlock()
	}
}

// maxStampLag is the most a file's timestamps are taken to lag this
// machine's clock (stampLag: on Linux, its coarse clock's tick and a
// millisecond; elsewhere this).
const maxStampLag = 20 * time.Millisecond

// coarseLag is the lag of a file system whose times are whole seconds
// (FAT's two): its files' digests are not waited for, and kept only once
// that old. A file whose mtime was set to a whole second (tar, rsync -t)
// is judged by its ctime where the system says it.
const coarseLag = 2 * time.Second

// lookup returns the digest of rel read with the stat fi (the file now):
// false when rel was not read, or was read with another stat.
func (p *Prepared) lookup(rel string, fi fs.FileInfo) (ledger.Entry, bool) {
	if p == nil || fi == nil {
		return ledger.Entry{}, false
	}
	p.mu.Lock()
	pf, ok := p.files[rel]
	p.mu.Unlock()
	if !ok || !sameStamp(pf.stat, fi) {
		return ledger.Entry{}, false
	}
	return pf.e, true
}

// record keeps e, the digest of rel, read from start on with the stat
// before and found with after once read: only when the file did not change
// while read, and its stat is older than start by more than its times could
// lag (racy otherwise: a write after the read could leave it as it is).
func (p *Prepared) record(rel string, before, after fs.FileInfo, start time.Time, e ledger.Entry) {
	if p == nil || before == nil || after == nil || !sameStamp(before, after) || !start.After(latestStamp(before).Add(stampLagOf(before))) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.files[rel]; ok || len(p.files) < DefaultCommitHold {
		p.files[rel] = preparedFile{stat: before, e: e}
	}
}

// store notes that content d is durable in the blob store.
func (p *Prepared) store(d ledger.Digest) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stored[d] = true
	p.mu.Unlock()
}

// isStored says whether content d is durable in the blob store.
func (p *Prepared) isStored(d ledger.Digest) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stored[d]
}

// sameStamp reports whether a and b are the stats of one file, unchanged.
func sameStamp(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.Mode() == b.Mode() &&
		a.ModTime().Equal(b.ModTime()) && ctime(a).Equal(ctime(b))
}

// latestStamp is the later of fi's mtime and ctime.
func latestStamp(fi fs.FileInfo) time.Time {
	t := fi.ModTime()
	if c := ctime(fi); c.After(t) {
		t = c
	}
	return t
}

// stampLagOf is how much fi's times may lag the clock: coarseLag when its
// ctime (the file system's own clock: no one sets it), or its mtime where
// the ctime is not read, is a whole second; stampLag otherwise.
func stampLagOf(fi fs.FileInfo) time.Duration {
	t := ctime(fi)
	if t.IsZero() {
		t = fi.ModTime()
	}
	if t.Nanosecond() == 0 {
		return coarseLag
	}
	return stampLag
}

// settleStamp waits, when f's stat fi was changed less than stampLag ago,
// until it was not, and returns its stat then: a digest read after it is
// kept (Prepared.record). A file written again meanwhile is waited for
// again, up to 4 × stampLag in all (then it is read as it is, and its
// digest may not be kept). A file of whole-second times is not waited for.
func settleStamp(f *os.File, fi fs.FileInfo) (fs.FileInfo, error) {
	for range 4 {
		if stampLagOf(fi) != stampLag {
			return fi, nil
		}
		d := time.Until(latestStamp(fi).Add(stampLag))
		if d <= 0 {
			return fi, nil
		}
		time.Sleep(min(d, stampLag) + time.Millisecond)
		var err error
		if fi, err = f.Stat(); err != nil {
			return nil, err
		}
	}
	return fi, nil
}

// PrepareFiles reads, hashes and stores the content of the cache's files
// (slash-separated paths) in blobs, ahead of a push that commits them,
// keeping what it did in p (a nil p: nothing is kept, the work is lost) —
// swamp's hints: the agent's work on what swamp wrote while swamp carries
// on. A file p holds as read with its stat now and stored is left alone; a
// file just written is waited for (settleStamp) so that its digest is kept.
// moved, when set, is called as the work moves: a file read, its content
// taken by the store. The first failure to store stops the puts (the push
// meets it again, bounded and said); a file that cannot be read is left to
// the push. Nothing is published or recorded, the state is not read: it is
// safe outside an operation, beside one.
func (h *Host) PrepareFiles(ctx context.Context, blobs *ledger.Bucket, files []string, p *Prepared, moved func()) error {
	if moved == nil {
		moved = func() {}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, rel := range files {
		g.Go(func() error { return h.prepareFile(gctx, blobs, rel, p, moved) })
	}
	return g.Wait()
}

func (h *Host) prepareFile(ctx context.Context, blobs *ledger.Bucket, rel string, p *Prepared, moved func()) error {
	f, err := h.dir.Open(rel)
	if err != nil {
		return nil // the push's to meet
	}
	defer f.Close()
	defer p.hold(rel)()
	before, err := f.Stat()
	if err != nil {
		return nil
	}
	e, ok := p.lookup(rel, before)
	if ok && p.isStored(e.SHA256) {
		return nil
	}
	if !ok {
		if before, err = settleStamp(f, before); err != nil {
			return nil
		}
		start := time.Now()
		var body []byte
		if e, body, err = h.readDigest(f, rel, before.Size()); err != nil {
			return nil
		}
		after, err := f.Stat()
		if err != nil {
			return nil
		}
		e.Mode = uint32(before.Mode().Perm())
		p.record(rel, before, after, start, e)
		moved()
		if body != nil {
			return h.prepareBody(ctx, blobs, e, bytes.NewReader(body), p)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	// Verified as it is sent: a file rewritten meanwhile fails.
	return h.prepareBody(ctx, blobs, e, movedReader{f, moved}, p)
}

func (h *Host) prepareBody(ctx context.Context, blobs *ledger.Bucket, e ledger.Entry, r io.Reader, p *Prepared) error {
	if err := blobs.Put(ctx, e.SHA256, r, e.Size); err != nil {
		if errors.Is(err, ledger.ErrChecksum) {
			return nil // changed since it was read: the push reads it again
		}
		return fmt.Errorf("store %s: %w", e.Path, err)
	}
	p.store(e.SHA256)
	return nil
}

// readDigest reads f (the cache's rel, of about size bytes), counted in
// Hashed: whole, its content returned, when small (smallFile), else
// streamed.
func (h *Host) readDigest(f *os.File, rel string, size int64) (ledger.Entry, []byte, error) {
	h.hashed.Add(1)
	if size < smallFile {
		body, err := readSmall(f, make([]byte, size+pooledBody))
		if err == nil {
			return ledger.Entry{Path: rel, SHA256: ledger.DigestOf(body), Size: int64(len(body))}, body, nil
		}
		if !errors.Is(err, errNotSmall) {
			return ledger.Entry{}, nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return ledger.Entry{}, nil, err
		}
	}
	d, n, err := cachefs.HashReader(f)
	return ledger.Entry{Path: rel, SHA256: d, Size: n}, nil, err
}

// movedReader is a file's content being stored: each read (the store
// taking it) is the work moving.
type movedReader struct {
	f     *os.File
	moved func()
}

func (r movedReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	r.moved()
	return n, err
}

// Seek lets a put read the content again for a retry, as from the file.
func (r movedReader) Seek(off int64, whence int) (int64, error) { return r.f.Seek(off, whence) }

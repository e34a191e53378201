package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/syncledger/syncledger/ledger"
)

// commitStage is a commit's stage of each changed file, done while the scan
// holds it open: its content is made durable (fsync: the ledger must never
// hold content this cache could lose, see syncCommitted) and stored in the
// scan's blob batch, unless stored or known says it is stored already (a
// Prepare, swamp's hints). The batch is flushed — every blob durable —
// before anything is published (ledger.PublishBatch). A blob stored for a
// commit that is then not published is garbage that blob GC collects.
func (h *Host) commitStage(ctx context.Context, stored map[ledger.Digest]bool, known *Prepared, b *ledger.BlobBatch) stage {
	return func(e ledger.Entry, f *os.File, body []byte) error {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("commit: sync %s: %w", e.Path, err)
		}
		if stored[e.SHA256] || known.isStored(e.SHA256) {
			return nil
		}
		return putContent(ctx, b, e, f, body)
	}
}

// prepareStage stores each changed file's content in b (Prepare flushes it),
// unless known says it is stored: the files' durability is the Commit's to
// ensure.
func prepareStage(ctx context.Context, b *ledger.BlobBatch, known *Prepared) stage {
	return func(e ledger.Entry, f *os.File, body []byte) error {
		if known.isStored(e.SHA256) {
			return nil
		}
		return putContent(ctx, b, e, f, body)
	}
}

// putContent stores e's content: body when the scan read it whole, else f,
// read again from its start and verified against e's digest while it is
// sent (a file changed since it was hashed fails with ErrChecksum: nothing is
// published).
func putContent(ctx context.Context, b *ledger.BlobBatch, e ledger.Entry, f *os.File, body []byte) error {
	var r io.Reader = f
	if body != nil {
		r = bytes.NewReader(body)
	}
	if err := b.Put(ctx, e.SHA256, r, e.Size); err != nil {
		if errors.Is(err, ledger.ErrChecksum) {
			return fmt.Errorf("upload %s: the file changed while committing; commit again: %w", e.Path, err)
		}
		return fmt.Errorf("upload %s: %w", e.Path, err)
	}
	return nil
}

// PrepareResult says what a Prepare uploaded.
type PrepareResult struct {
	Files int      `json:"files"` // changed paths found (deletions included)
	Bytes int64    `json:"bytes"`
	Paths []string `json:"paths,omitempty"`
	// Prepared holds what the Prepare did (PrepareOptions.Prepared, or a
	// new one), for the Commit after it (CommitOptions.Prepared).
	Prepared *Prepared `json:"-"`
}

// PrepareOptions describe a Prepare.
type PrepareOptions struct {
	Partitions []string // CommitOptions.Partitions
	// Changed is CommitOptions.Changed: nil scans the whole cache.
	Changed []string
	// Prepared is the work done ahead of this Prepare (swamp's hints, an
	// earlier Prepare): a file it holds unchanged is not read again, and
	// what this Prepare reads and stores is added to it (nil: a new one,
	// the result's).
	Prepared *Prepared
}

// Prepare is the first half of a two-phase commit: it scans the cache like
// Commit and uploads the changed content, publishing nothing. A Commit right
// after it, given the result's Prepared, then reads no file again that did
// not change since, stores no content again, and appends the events — the
// short step a caller runs under a global lock (swamp's commitPush). A file
// just written is waited for before it is read (at most stampLag), so that
// its digest is kept (Prepared).
func (h *Host) Prepare(ctx context.Context, opt PrepareOptions) (_ PrepareResult, err error) {
	ctx, done := h.watching(ctx, "prepare")
	defer func() { err = done(err) }()
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return PrepareResult{}, aerr
	}
	defer release()
	s, err := h.load(ctx, false)
	if err != nil {
		return PrepareResult{}, err
	}
	known := opt.Prepared
	if known == nil {
		known = NewPrepared()
	}
	b := h.blobsPort().Batch()
	sc, err := h.scan(s, partitionFilter(opt.Partitions), opt.Changed, prepareStage(ctx, b, known), scanBound{known: known, settle: true})
	if err == nil {
		err = b.Flush(ctx) // what known says is stored is durable
	}
	if err != nil {
		return PrepareResult{}, err
	}
	res := PrepareResult{Files: len(sc.changes), Prepared: known}
	for _, e := range sc.changes {
		res.Paths = append(res.Paths, e.Path)
		if !e.Deleted {
			res.Bytes += e.Size
			known.store(e.SHA256)
		}
	}
	return res, nil
}

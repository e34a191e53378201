package swamp

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp/index"
	"golang.org/x/sync/errgroup"
)

// copier copies one partition's objects into the blob store, verifying each,
// and remembers what it found across the attempts of one partition.
type copier struct {
	im  *importer
	src []index.Entry

	mu          sync.Mutex
	found       map[string]found // rel → what its object held
	copied      int
	copiedBytes int64
}

// found is the outcome of copying one object.
type found struct {
	entry    ledger.Entry // the object's content (Path, SHA256, Size, Mode)
	missing  bool         // the index lists it, the store has no such object
	mismatch *Mismatch    // content differs from the index entry
}

func newCopier(im *importer, src []index.Entry) *copier {
	return &copier{im: im, src: src, found: map[string]found{}}
}

// materialize returns the partition's files as the ledger should hold them after
// the import, given what it holds now (have): every source file whose content
// is verified (or, with AcceptMismatch, whatever its object holds), and for a
// file whose object is missing or mismatched, have's version if any. complete
// is false when some source file is left out that way. Objects are downloaded
// only where have does not already hold the entry's sha256 and size.
func (c *copier) materialize(ctx context.Context, have map[string]ledger.Entry) (map[string]ledger.Entry, bool, error) {
	want := map[string]ledger.Entry{}
	var todo []index.Entry
	for _, e := range c.src {
		if h, ok := have[e.Key]; ok && e.SHA256 != "" && h.SHA256.String() == e.SHA256 && h.Size == e.Size && h.Mode == ImportMode {
			want[e.Key] = h
			continue
		}
		c.mu.Lock()
		_, done := c.found[e.Key]
		c.mu.Unlock()
		if !done {
			todo = append(todo, e)
		}
	}
	if err := c.fetchAll(ctx, todo); err != nil {
		return nil, false, err
	}
	complete := true
	for _, e := range c.src {
		if _, ok := want[e.Key]; ok {
			continue
		}
		f := c.found[e.Key]
		if f.missing || (f.mismatch != nil && !f.mismatch.Imported) {
			complete = false
			if h, ok := have[e.Key]; ok {
				want[e.Key] = h
			}
			continue
		}
		want[e.Key] = f.entry
	}
	return want, complete, nil
}

// report adds the partition's findings to the summary.
func (c *copier) report() {
	sum := c.im.sum
	sum.Copied += c.copied
	sum.CopiedBytes += c.copiedBytes
	for _, e := range c.src {
		f, ok := c.found[e.Key]
		switch {
		case !ok:
		case f.missing:
			sum.Missing = append(sum.Missing, e.Key)
		case f.mismatch != nil:
			sum.Mismatches = append(sum.Mismatches, *f.mismatch)
		}
	}
}

func (c *copier) fetchAll(ctx context.Context, todo []index.Entry) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.im.cfg.Parallel)
	for _, e := range todo {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			f, err := c.fetch(gctx, e)
			if err != nil {
				return err
			}
			c.mu.Lock()
			c.found[e.Key] = f
			c.mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// fetch downloads one object into a temporary file while hashing it, checks it
// against the entry, and stores it in the blob store under its digest.
func (c *copier) fetch(ctx context.Context, e index.Entry) (found, error) {
	key := c.im.layout.DataKey(e.Key)
	rc, err := c.im.cfg.Source.GetObject(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return found{missing: true}, nil
	}
	if err != nil {
		return found{}, fmt.Errorf("copy %s: %w", key, err)
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(c.im.cfg.TempDir, "syncledger-swamp-import-*")
	if err != nil {
		return found{}, fmt.Errorf("copy %s: %w", key, err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rc)
	if err != nil {
		return found{}, fmt.Errorf("copy %s: %w", key, err)
	}
	var d ledger.Digest
	h.Sum(d[:0])
	f := found{entry: ledger.Entry{Path: e.Key, SHA256: d, Size: n, Mode: ImportMode}}
	if (e.SHA256 != "" && d.String() != e.SHA256) || n != e.Size {
		f.mismatch = &Mismatch{Path: e.Key, WantSize: e.Size, GotSize: n, WantSHA256: e.SHA256,
			GotSHA256: d.String(), Imported: c.im.cfg.AcceptMismatch}
		if !c.im.cfg.AcceptMismatch {
			return f, nil
		}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return found{}, fmt.Errorf("copy %s: %w", key, err)
	}
	if err := c.im.cfg.Blobs.Put(ctx, d, tmp, n); err != nil {
		return found{}, fmt.Errorf("copy %s: %w", key, err)
	}
	c.mu.Lock()
	c.copied++
	c.copiedBytes += n
	c.mu.Unlock()
	return f, nil
}

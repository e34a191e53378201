package fileblob

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger/driver"
)

// flushParallel is how many directory fsyncs a Flush runs at once: on a disk,
// concurrent fsyncs share the journal's commits.
const flushParallel = 16

// NewBatch implements driver.Bucket: each put writes, fsyncs and renames its
// file as PutObject does, and Flush fsyncs each directory the batch's puts
// renamed into, once — one directory fsync per directory touched instead of
// one per object. StatObject answers an absent key from one listing of its
// directory (read on the batch's second question about it: a batch of one
// object stats it) with no syscall of its own; a key the listing holds is
// stat'ed.
func (s *Store) NewBatch() driver.Batch {
	return &batch{s: s, seed: maphash.MakeSeed(), dirs: map[string]bool{}, lists: map[string]*listing{}}
}

type batch struct {
	s     *Store
	seed  maphash.Seed // of the listings' name hashes
	mu    sync.Mutex
	dirs  map[string]bool     // directories renamed into, to fsync at Flush
	lists map[string]*listing // directory → the names it held when first asked
	done  bool
}

// listAfter is how many questions about one directory a batch answers with
// a stat each before it lists the directory: a commit of one file stats its
// blob, a bulk commit lists each fan-out directory once.
const listAfter = 2

// listing is the names of one directory, read once, with those the batch
// put there since — as hashes (8 bytes a name, not the name: a 1M-blob store
// lists 1M names). Two names with one hash only make an absent key look
// present, which the store's StatObject then answers: a listing decides only
// absence.
type listing struct {
	mu    sync.Mutex
	asked int
	read  bool
	names map[uint64]struct{}
	err   error
}

func (b *batch) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if b.flushed() {
		return errFlushed
	}
	dir, err := b.s.write(ctx, key, r, size)
	if err != nil {
		return err
	}
	b.mu.Lock()
	done, l := b.done, b.lists[dir]
	b.dirs[dir] = true
	b.mu.Unlock()
	if done {
		// Flush ran meanwhile and may not have synced dir.
		return errFlushed
	}
	if l != nil {
		l.mu.Lock()
		if l.names != nil {
			l.names[maphash.String(b.seed, filepath.Base(filepath.FromSlash(key)))] = struct{}{}
		}
		l.mu.Unlock()
	}
	return nil
}

var errFlushed = errors.New("the batch was flushed")

func (b *batch) flushed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// Stat: a key its directory's listing lacks is absent, which costs nothing
// after the listing; others are the store's Stat.
// A listing is a hint that may be stale, never proof: an object stored since
// is stored again (identical content under its own address), and one
// removed since is found absent by the stat.
func (b *batch) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	path, err := b.s.path(key)
	if err != nil {
		return driver.ObjectInfo{}, err
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	b.mu.Lock()
	l := b.lists[dir]
	if l == nil {
		l = &listing{}
		b.lists[dir] = l
	}
	b.mu.Unlock()
	l.mu.Lock()
	if l.asked++; !l.read && l.asked >= listAfter {
		l.names, l.err = readNames(dir, b.seed)
		l.read = true
	}
	missing := false
	if l.read && l.err == nil {
		_, held := l.names[maphash.String(b.seed, name)]
		missing = !held
	}
	l.mu.Unlock()
	if missing {
		return driver.ObjectInfo{}, errAbsent
	}
	info, err := b.s.Stat(ctx, key)
	if err == nil {
		// Present, but perhaps put by a batch never flushed (a commit that
		// failed before its publish): its name may not be durable yet. A
		// caller that trusts this answer names the object once Flush returns,
		// so Flush syncs its directory too.
		b.mu.Lock()
		if !b.done {
			b.dirs[dir] = true
		}
		b.mu.Unlock()
	}
	return info, err
}

// readNames lists the hashes of dir's names; a missing directory holds none.
func readNames(dir string, seed maphash.Seed) (map[uint64]struct{}, error) {
	f, err := os.Open(dir)
	if notFound(err) {
		return map[uint64]struct{}{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	m := make(map[uint64]struct{}, len(names))
	for _, n := range names {
		m[maphash.String(seed, n)] = struct{}{}
	}
	return m, nil
}

// Flush fsyncs every directory the batch renamed into or found an object in
// (Stat), each once: from then on every object it put or found survives
// a power cut (each file's content was fsynced before its rename, each new
// directory into its parent).
func (b *batch) Flush(ctx context.Context) error {
	b.mu.Lock()
	b.done = true
	dirs := slices.Sorted(maps.Keys(b.dirs))
	b.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(flushParallel)
	for _, d := range dirs {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fsx.SyncDir(d)
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("flush batch: %w", err)
	}
	return nil
}

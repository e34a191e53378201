package swamp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp/index"
)

// Format says where a datastore's file list came from.
type Format string

// Formats, in the order ReadRemote tries them.
const (
	FormatV2      Format = "v2"      // _index/_meta.json v2 and every shard it lists
	FormatV1      Format = "v1"      // the monolith .datastore-index.json
	FormatListing Format = "listing" // neither: a listing of the objects, as swamp's discovery does
)

// Snapshot is the file list of a swamp datastore as an unscoped pull sees it.
type Snapshot struct {
	Format    Format
	CommitSeq int64 // the v2 meta's commitSeq (FormatV2 only)
	// Partitions are the shards the v2 meta lists (FormatV2 only).
	Partitions []string
	// Entries are the data files by rel path; internal files are not among them.
	Entries map[string]index.Entry
	// Internal are the rel paths of internal files (swamp's isInternalCacheFile,
	// plus the .locks/ directory of a listing) found in the index or listing and
	// skipped, sorted.
	Internal []string
	// Namespaces are the top-level directories a solo-mode listing skipped
	// because they hold another namespace (a .namespace.json, _index/_meta.json
	// or .datastore-index.json directly inside), sorted.
	Namespaces []string
	// Monolith reports that a v2 datastore also holds the legacy monolith, which
	// v2 commits no longer update (reference §1.6, §4.4).
	Monolith bool
}

// readObject reads a whole (index) object, at most index.MaxObjectSize bytes.
func readObject(ctx context.Context, objs *ledger.Bucket, key string) ([]byte, error) {
	rc, err := objs.GetObject(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(rc, index.MaxObjectSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if n > index.MaxObjectSize {
		return nil, fmt.Errorf("read %s: larger than %d bytes: %w", key, index.MaxObjectSize, ledger.ErrTooLarge)
	}
	return buf.Bytes(), nil
}

// ReadRemote reads the file list of the swamp datastore in objs (whose root is
// swamp's client prefix) under layout, the way an unscoped swamp pull does:
//
//  1. _index/_meta.json v2: every listed shard, each of which must exist and
//     parse (swamp's assembleIndexFromShards throws otherwise);
//  2. otherwise (no meta, or a v1 meta) the monolith .datastore-index.json;
//  3. otherwise a listing of the layout's objects (swamp's discovery), each
//     object an entry with its size and modification time and no sha256.
//
// Internal files are dropped from the result and named in Snapshot.Internal. A
// meta that is present but does not parse is an error (swamp's later version
// refuses it too) rather than a silent fall-back to a possibly stale monolith.
func ReadRemote(ctx context.Context, objs *ledger.Bucket, layout index.Layout) (*Snapshot, error) {
	b, err := readObject(ctx, objs, layout.MetaKey())
	switch {
	case err == nil:
		meta, err := index.ParseMeta(b)
		if err != nil {
			return nil, fmt.Errorf("read swamp datastore: %s: %w", layout.MetaKey(), err)
		}
		if meta.Version == index.MetaV2 {
			return readV2(ctx, objs, layout, meta)
		}
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, fmt.Errorf("read swamp datastore: %w", err)
	}
	b, err = readObject(ctx, objs, layout.MonolithKey())
	switch {
	case err == nil:
		m, err := index.ParseMonolith(b)
		if err != nil {
			return nil, fmt.Errorf("read swamp datastore: %s: %w", layout.MonolithKey(), err)
		}
		s := &Snapshot{Format: FormatV1, Entries: map[string]index.Entry{}}
		s.add(m.Entries)
		return s.done(), nil
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, fmt.Errorf("read swamp datastore: %w", err)
	}
	return readListing(ctx, objs, layout)
}

func readV2(ctx context.Context, objs *ledger.Bucket, layout index.Layout, meta index.Meta) (*Snapshot, error) {
	s := &Snapshot{Format: FormatV2, CommitSeq: meta.CommitSeq, Partitions: meta.Partitions, Entries: map[string]index.Entry{}}
	for _, p := range meta.Partitions {
		b, err := readObject(ctx, objs, layout.ShardKey(p))
		if err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return nil, fmt.Errorf("read swamp datastore: %s lists partition %q but %s is missing (run swamp's migrate-index): %w",
					layout.MetaKey(), p, layout.ShardKey(p), ledger.ErrInvalid)
			}
			return nil, fmt.Errorf("read swamp datastore: %w", err)
		}
		sh, err := index.ParseShard(b)
		if err != nil {
			return nil, fmt.Errorf("read swamp datastore: %s: %w", layout.ShardKey(p), err)
		}
		s.add(sh.Entries)
	}
	if _, err := objs.StatObject(ctx, layout.MonolithKey()); err == nil {
		s.Monolith = true
	} else if !errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("read swamp datastore: %w", err)
	}
	return s.done(), nil
}

// add merges index entries, setting internal ones aside (swamp's scrubIndex).
// A rel listed by two shards keeps the later shard's entry, as swamp's
// assembly does.
func (s *Snapshot) add(es map[string]index.Entry) {
	for rel, e := range es {
		if isInternal(rel) {
			s.Internal = append(s.Internal, rel)
			continue
		}
		s.Entries[rel] = e
	}
}

func (s *Snapshot) done() *Snapshot {
	slices.Sort(s.Internal)
	s.Internal = slices.Compact(s.Internal)
	slices.Sort(s.Namespaces)
	return s
}

// isInternal is swamp's isInternalCacheFile (ledger.IsInternal) plus the
// .locks/ directory holding namespaced datastores' global locks.
func isInternal(rel string) bool {
	return ledger.IsInternal(rel) || strings.HasPrefix(rel, index.LocksDir)
}

// namespaceMarkers are the objects whose presence directly inside a top-level
// directory makes a solo-mode listing treat that directory as a namespace.
var namespaceMarkers = []string{index.NamespaceFile, index.MetaName, index.MonolithName}

func readListing(ctx context.Context, objs *ledger.Bucket, layout index.Layout) (*Snapshot, error) {
	var infos []ledger.ObjectInfo
	err := objs.ListObjects(ctx, layout.Prefix(), func(info ledger.ObjectInfo) error {
		infos = append(infos, info)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read swamp datastore: list %q: %w", layout.Prefix(), err)
	}
	s := &Snapshot{Format: FormatListing, Entries: map[string]index.Entry{}}
	foreign := map[string]bool{}
	if layout.Namespace == "" {
		for _, info := range infos {
			dir, rest, ok := strings.Cut(info.Key, "/")
			if ok && slices.Contains(namespaceMarkers, rest) {
				foreign[dir] = true
			}
		}
	}
	for _, info := range infos {
		rel, ok := layout.Rel(info.Key)
		if !ok {
			continue
		}
		if dir, _, ok := strings.Cut(rel, "/"); ok && foreign[dir] {
			continue
		}
		if isInternal(rel) {
			s.Internal = append(s.Internal, rel)
			continue
		}
		s.Entries[rel] = index.Entry{Key: rel, Size: info.Size, LastModified: index.FormatTime(info.ModTime)}
	}
	for dir := range foreign {
		s.Namespaces = append(s.Namespaces, dir)
	}
	return s.done(), nil
}

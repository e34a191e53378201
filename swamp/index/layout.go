package index

import (
	"fmt"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// Well-known keys and prefixes, relative to the datastore root (the client
// prefix, plus {namespace}/ in namespaced mode).
const (
	IndexDir      = "_index/"               // shards and meta
	MetaName      = IndexDir + "_meta.json" // the partition meta
	MonolithName  = ".datastore-index.json" // the legacy monolithic index
	ControlDir    = "_control/"             // small control-plane records
	NamespaceFile = ".namespace.json"       // {ns}/.namespace.json, the namespace manifest
	LocksDir      = ".locks/"               // global locks of namespaced datastores ({ns}.lock)
	shardSuffix   = ".json"
)

// Layout forms the keys of one datastore: solo (Namespace "") or namespaced,
// where every key (index, data, control) is prefixed with "{ns}/"
// (s3_cache_sync.ts key helpers; reference §1.1).
type Layout struct {
	Namespace string
}

// NewLayout returns the layout for namespace ns ("" for solo mode). A namespace
// is one key segment.
func NewLayout(ns string) (Layout, error) {
	if ns == "" {
		return Layout{}, nil
	}
	if err := checkText(ns); err != nil || strings.ContainsAny(ns, "/\\") || ns == "." || ns == ".." {
		return Layout{}, fmt.Errorf("namespace %q: want one path segment: %w", clip(ns), ledger.ErrInvalid)
	}
	return Layout{Namespace: ns}, nil
}

// Prefix returns "" in solo mode, "{ns}/" in namespaced mode.
func (l Layout) Prefix() string {
	if l.Namespace == "" {
		return ""
	}
	return l.Namespace + "/"
}

// Key returns the object key of a datastore-relative key.
func (l Layout) Key(rel string) string { return l.Prefix() + rel }

// MetaKey returns the key of _index/_meta.json.
func (l Layout) MetaKey() string { return l.Key(MetaName) }

// ShardKey returns the key of a partition's shard, _index/{partition}.json.
func (l Layout) ShardKey(partition string) string {
	return l.Key(IndexDir + partition + shardSuffix)
}

// MonolithKey returns the key of .datastore-index.json.
func (l Layout) MonolithKey() string { return l.Key(MonolithName) }

// DataKey returns the key of a data file (its rel path).
func (l Layout) DataKey(rel string) string { return l.Key(rel) }

// ControlKey returns the key of a control-plane record, _control/{name}.
func (l Layout) ControlKey(name string) string { return l.Key(ControlDir + name) }

// Rel strips the layout's prefix from an object key; ok is false for a key
// outside the layout.
func (l Layout) Rel(key string) (rel string, ok bool) {
	p := l.Prefix()
	if !strings.HasPrefix(key, p) || len(key) == len(p) {
		return "", false
	}
	return key[len(p):], true
}

// ShardPartition returns the partition of a shard key relative to the layout
// (_index/{partition}.json), or ok false if rel is not a shard key (the meta is
// not a shard).
func ShardPartition(rel string) (partition string, ok bool) {
	if !strings.HasPrefix(rel, IndexDir) || !strings.HasSuffix(rel, shardSuffix) || rel == MetaName {
		return "", false
	}
	p := strings.TrimSuffix(strings.TrimPrefix(rel, IndexDir), shardSuffix)
	if ValidatePartition(p) != nil {
		return "", false
	}
	return p, true
}

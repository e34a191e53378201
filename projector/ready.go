package projector

import (
	"fmt"
	"maps"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// Op is what the shell does to the cache for one Change.
type Op uint8

const (
	// OpWrite: fetch New.SHA256 from the blob store, verify it and write it at
	// Path with New.Mode (temp file, fsync, rename). If the cache already holds
	// exactly that content the fetch may be skipped.
	OpWrite Op = iota + 1
	// OpLazy: record New as metadata only (lazy hydration). Any file at Path holds
	// older content and is removed; its absence is not a deletion.
	OpLazy
	// OpDelete: remove the file at Path (absent is fine) and its index row.
	OpDelete
	// OpIndex: the cache already holds Path as New says (the host's own commit),
	// or already lacks it when New is nil: only the index row changes.
	OpIndex
	// OpShadow: New is the index row, but the cache holds a directory of that
	// name (other indexed paths lie under it: the directory wins, see
	// Core.Shadowed). A file at Path is removed; a directory there stays.
	OpShadow
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpLazy:
		return "lazy"
	case OpDelete:
		return "delete"
	case OpIndex:
		return "index"
	case OpShadow:
		return "shadow"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Change is the fate of one path in a Ready: the final state after all the
// Ready's events (the last writer wins), not each step. Every path an applied
// event touches has a Change, even one whose New equals Old (the shell may find
// nothing to do): this way a file left by an apply interrupted before its Ready
// was persisted is always rewritten when the events are applied again.
type Change struct {
	Path string
	Op   Op
	// Old is the index row before this Ready (nil: none). A cache file that
	// matches neither Old nor New was changed locally, or was left by an apply
	// interrupted before its Ready was persisted: only the shell can tell (a
	// journal of the Ready it was applying does), and it must never drop local
	// changes silently. Old and New both nil: the path was created and deleted
	// within this Ready.
	Old *File
	// New is the index row after this Ready (nil: the row is deleted).
	New *File
	// Seq is the seq of the event that decided New; 0 for Hydrate.
	Seq ledger.Seq
	// OldShadowed: Old was shadowed (see OpShadow): the cache held a directory
	// at Path, not Old's file. The Ready removes the paths under it first.
	OldShadowed bool
	// Earlier lists the other versions that events of this Ready before the
	// last left at Path (a nil element: deleted), distinct, oldest first. They
	// are committed content: a cache file holding one of them is not a local
	// change. That is the file of a host's own commit whose outcome the host
	// never learned (a crash after the append, a lost answer): the host's index
	// still holds what was there before, the log holds the commit and whatever
	// others committed on top, and the host's file holds the commit's version.
	Earlier []*File
}

// Ready is work the core wants done before its state may advance. The shell
// performs the Changes on the cache, makes durable what MustSync names, then
// persists, in one atomic transaction, the index rows (each Change's New; nil
// deletes the row), the Marks, the HWM and the Ledger (when set), and then calls
// Advance. Until then the durable state is unchanged, and a crash anywhere in
// between is recovered by reading again: the events whose marks were not
// persisted are applied again.
type Ready struct {
	Ledger  string          // lineage to persist; "" if already persisted
	Changes []Change        // in path order
	Marks   map[string]Mark // partitions whose mark moved, with the new mark
	HWM     ledger.Seq      // the HWM to persist (the current one if it did not move)
	// Reset: the Ready replaces the whole durable state (Restore): the shell
	// empties the persisted index, marks and HWM in the same transaction before it
	// writes the Ready's, so marks and HWM may move back. Changes then cover every
	// path the old state or the new one holds (and the stray paths Restore was
	// given), Marks every partition of the new state, and Ledger is set. A file a
	// reset finds missing is restored, not taken for a local deletion: a rebuild
	// starts the cache over.
	Reset bool
	id    uint64
}

// Sync is one path a Ready claims. Content: the file holds New's bytes; the
// shell fsyncs the file and every directory from its parent up to the cache
// root (a directory the apply created is durable only once its parent is). Not
// Content (deleted, lazy, or an own commit's deletion): the file is absent; the
// shell fsyncs the directories on its path that still exist, which hold the
// removal.
type Sync struct {
	Path    string
	Content bool
}

// MustSync returns what the shell must make durable in the cache before the
// transaction that persists rd (etcd raft's Ready.MustSync is the model): the
// state it persists claims these files' content, or their absence, so after a
// power cut the cache must hold at least that. It names every Change's path,
// including those whose file the shell finds already right (written or removed
// by an interrupted apply that never synced them, or, for the host's own
// commit, written by the user), with Content set when the new index row says
// the cache holds the file.
func (rd Ready) MustSync() []Sync {
	if len(rd.Changes) == 0 {
		return nil
	}
	out := make([]Sync, len(rd.Changes))
	for i, ch := range rd.Changes {
		out[i] = Sync{Path: ch.Path, Content: ch.New != nil && !ch.New.Lazy && ch.Op != OpShadow}
	}
	return out
}

func (rd Ready) clone() Ready {
	c := rd
	c.Marks = maps.Clone(rd.Marks)
	c.Changes = slices.Clone(rd.Changes)
	for i, ch := range c.Changes {
		if ch.Old != nil {
			f := *ch.Old
			c.Changes[i].Old = &f
		}
		if ch.New != nil {
			f := *ch.New
			c.Changes[i].New = &f
		}
		c.Changes[i].Earlier = cloneFiles(ch.Earlier)
	}
	return c
}

// cloneFiles deep-copies a list of versions (nil elements kept).
func cloneFiles(fs []*File) []*File {
	if fs == nil {
		return nil
	}
	out := make([]*File, len(fs))
	for i, f := range fs {
		if f != nil {
			g := *f
			out[i] = &g
		}
	}
	return out
}

package projector

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// File and directory of the same name.
//
// Two hosts can race to commit a file "foo" and a file "foo/bar" in different
// partitions: both appends succeed, and the ledger then holds a path that is a
// file and a directory at once. Every host applies one deterministic rule, the
// same whatever it read first: the directory wins. A file with indexed paths
// under it is shadowed: it keeps its index row (its content stays reachable in
// the ledger), the cache holds the directory and not the file, and the file is
// written again when the last path under it goes. Whether a file is shadowed
// is a function of the index alone, so hosts, fresh hosts, rebuilds and replays
// agree. A commit that would itself create the clash is refused
// (CommitEvents, ErrClash): only a race makes one.

// dirCounts returns, for every directory of the durable index, how many rows
// lie under it; built on first use and kept up to date by Advance.
func (c *Core) dirCounts() map[string]int {
	if c.dirs == nil {
		c.dirs = map[string]int{}
		for p := range c.st.Files {
			addDirs(c.dirs, p, 1)
		}
	}
	return c.dirs
}

// addDirs adds n to the count of every directory above path.
func addDirs(dirs map[string]int, path string, n int) {
	for i := len(path) - 1; i > 0; i-- {
		if path[i] != '/' {
			continue
		}
		d := path[:i]
		if dirs[d] += n; dirs[d] == 0 {
			delete(dirs, d)
		}
	}
}

// Shadowed reports whether the durable index holds path as a file that other
// indexed paths lie under: the cache holds a directory there, not the file
// (the directory wins). Its row stays; absent from the cache it is not a
// deletion.
func (c *Core) Shadowed(path string) bool {
	_, ok := c.st.Files[path]
	return ok && c.dirCounts()[path] > 0
}

// ShadowedFiles returns the durable index's shadowed files, sorted.
func (c *Core) ShadowedFiles() []string {
	var out []string
	for d := range c.dirCounts() {
		if _, ok := c.st.Files[d]; ok {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// ShadowedPaths returns which of paths (an index's paths, any order) are
// shadowed by others under them, sorted: the rule of Core.Shadowed for a set
// of paths the core does not hold (a snapshot, a replay's result).
func ShadowedPaths(paths []string) []string {
	dirs := map[string]int{}
	for _, p := range paths {
		addDirs(dirs, p, 1)
	}
	var out []string
	for _, p := range paths {
		if dirs[p] > 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// shadowChanges fixes the Changes of a Ready (in path order, one per staged
// path) for the directory-wins rule and returns them with the Changes of
// files whose shadowing the Ready switches on or off without touching them.
func (c *Core) shadowChanges(chs []Change) []Change {
	if len(chs) == 0 {
		return chs // no path touched: nothing to count (dirCounts costs a pass over the index)
	}
	// How the Ready moves the row count under each directory.
	delta := map[string]int{}
	for _, ch := range chs {
		switch {
		case ch.Old == nil && ch.New != nil:
			addDirs(delta, ch.Path, 1)
		case ch.Old != nil && ch.New == nil:
			addDirs(delta, ch.Path, -1)
		}
	}
	dirs := c.dirCounts()
	if len(dirs) == 0 && len(delta) == 0 {
		return chs
	}
	touched := make(map[string]bool, len(chs))
	for i := range chs {
		ch := &chs[i]
		touched[ch.Path] = true
		ch.OldShadowed = ch.Old != nil && dirs[ch.Path] > 0
		newShadowed := ch.New != nil && dirs[ch.Path]+delta[ch.Path] > 0
		if newShadowed {
			ch.Op = OpShadow
		}
	}
	// Files the Ready does not touch above paths it touches get a Change
	// too: their shadowing may switch, and an apply of the same events
	// interrupted before it was persisted (or discarded) may have removed or
	// written the file, which the cache must (not) hold as the index says.
	// Only clashes have such files.
	var extra []Change
	above := map[string]bool{}
	for _, ch := range chs {
		for i := len(ch.Path) - 1; i > 0; i-- {
			if ch.Path[i] == '/' {
				above[ch.Path[:i]] = true
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(above)) {
		f, ok := c.st.Files[d]
		if !ok || touched[d] {
			continue
		}
		was, is := dirs[d] > 0, dirs[d]+delta[d] > 0
		old, nw := f, f
		ch := Change{Path: d, Old: &old, New: &nw, OldShadowed: was}
		switch {
		case is:
			ch.Op = OpShadow
		case f.Lazy:
			ch.Op = OpLazy
		default:
			ch.Op = OpWrite // not shadowed (or no longer: the last path under it went): the cache holds it
		}
		extra = append(extra, ch)
	}
	if len(extra) == 0 {
		return chs
	}
	chs = append(chs, extra...)
	slices.SortFunc(chs, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return chs
}

// advanceDirs updates the directory counts for the Changes Advance applies.
func (c *Core) advanceDirs(chs []Change) {
	if c.dirs == nil {
		return // built on first use, from the new state
	}
	for _, ch := range chs {
		_, had := c.st.Files[ch.Path]
		switch {
		case !had && ch.New != nil:
			addDirs(c.dirs, ch.Path, 1)
		case had && ch.New == nil:
			addDirs(c.dirs, ch.Path, -1)
		}
	}
}

// ClashError: a commit would make a path a file and a directory at once, from
// the committing host's own view. Nothing was published. errors.Is(err,
// ErrClash) holds.
type ClashError struct {
	File  string // the file
	Under string // a path the commit or the index holds under it
}

func (e *ClashError) Error() string {
	return fmt.Sprintf("%q would be a file and also the directory of %q; remove or rename one of them, then commit again: %v", e.File, e.Under, ErrClash)
}

func (e *ClashError) Unwrap() error { return ErrClash }

// checkClash refuses a commit whose entries would, on top of the durable
// index, create a file with paths under it. A file the index already shadows
// may gain more paths under it: the cache holds the directory already.
func (c *Core) checkClash(entries []ledger.Entry) error {
	delta := map[string]int{}
	after := map[string]bool{} // the entries' paths, true if written
	for _, en := range entries {
		_, had := c.st.Files[en.Path]
		after[en.Path] = !en.Deleted
		switch {
		case !had && !en.Deleted:
			addDirs(delta, en.Path, 1)
		case had && en.Deleted:
			addDirs(delta, en.Path, -1)
		}
	}
	dirs := c.dirCounts()
	has := func(p string) bool {
		if w, ok := after[p]; ok {
			return w
		}
		_, ok := c.st.Files[p]
		return ok
	}
	for _, en := range entries {
		if en.Deleted {
			continue
		}
		if dirs[en.Path]+delta[en.Path] > 0 {
			return &ClashError{File: en.Path, Under: c.someUnder(en.Path, after)}
		}
		for i := len(en.Path) - 1; i > 0; i-- {
			if en.Path[i] != '/' {
				continue
			}
			a := en.Path[:i]
			if has(a) && !c.Shadowed(a) {
				return &ClashError{File: a, Under: en.Path}
			}
		}
	}
	return nil
}

// someUnder returns the first path under dir that the index holds once the
// commit's entries (after: path → written) are applied.
func (c *Core) someUnder(dir string, after map[string]bool) string {
	held := func(p string) bool {
		if w, ok := after[p]; ok {
			return w
		}
		_, ok := c.st.Files[p]
		return ok
	}
	var under []string
	for _, m := range []iter.Seq[string]{maps.Keys(c.st.Files), maps.Keys(after)} {
		for p := range m {
			if strings.HasPrefix(p, dir+"/") && held(p) {
				under = append(under, p)
			}
		}
	}
	if len(under) == 0 {
		return dir + "/…"
	}
	return slices.Min(under)
}

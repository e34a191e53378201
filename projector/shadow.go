package projector

import (
	"fmt"
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
// deletion. It reads path's row and, if there is one, the first row under it.
func (c *Core) Shadowed(path string) (bool, error) {
	if _, ok, err := c.file(path); err != nil || !ok {
		return false, err
	}
	return c.under(path)
}

// ShadowedFiles returns the durable index's shadowed files, sorted: one pass
// over the index in path order.
func (c *Core) ShadowedFiles() ([]string, error) {
	var sc shadowScan
	if err := c.files("", func(p string, _ File) bool { sc.add(p); return true }); err != nil {
		return nil, err
	}
	slices.Sort(sc.out)
	return sc.out, nil
}

// shadowScan finds the shadowed paths of an index read in path order, keeping
// only the rows whose subtree the scan is in: a row r's subtree (r + "/…")
// lies in [r, r+"0") in path order ('0' follows '/'), as does everything that
// has r as a prefix followed by a byte below '0', so the open rows nest.
type shadowScan struct {
	open []struct {
		path     string
		shadowed bool
	}
	out []string
}

func (s *shadowScan) add(p string) {
	for n := len(s.open); n > 0; n-- {
		top := s.open[n-1].path
		if strings.HasPrefix(p, top) && len(p) > len(top) && p[len(top)] < '0' {
			break
		}
		s.open = s.open[:n-1]
	}
	for i := range s.open {
		o := &s.open[i]
		if !o.shadowed && len(p) > len(o.path) && p[len(o.path)] == '/' {
			o.shadowed = true
			s.out = append(s.out, o.path)
		}
	}
	s.open = append(s.open, struct {
		path     string
		shadowed bool
	}{path: p})
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
// It reads, for each Change, whether rows lie under its path, and the rows of
// the directories above the Changes (only a clash makes one a file).
func (c *Core) shadowChanges(chs []Change) ([]Change, error) {
	if len(chs) == 0 {
		return chs, nil
	}
	// after reports whether rows lie under d once the Ready is persisted,
	// given whether durable rows do (had): a Change under d that writes one,
	// or a durable row under d that no Change deletes.
	after := func(d string, had bool) (bool, error) {
		pre := d + "/"
		deletes := false
		i, _ := slices.BinarySearchFunc(chs, pre, func(ch Change, p string) int { return strings.Compare(ch.Path, p) })
		for ; i < len(chs) && strings.HasPrefix(chs[i].Path, pre); i++ {
			if chs[i].New != nil {
				return true, nil
			}
			deletes = deletes || chs[i].Old != nil
		}
		if !had || !deletes {
			return had, nil
		}
		kept := false
		err := c.files(pre, func(p string, _ File) bool {
			_, staged := c.pend.files[p]
			kept = !staged
			return !kept
		})
		return kept, err
	}
	for i := range chs {
		ch := &chs[i]
		if ch.Old == nil && ch.New == nil {
			continue
		}
		had, err := c.under(ch.Path)
		if err != nil {
			return nil, err
		}
		ch.OldShadowed = ch.Old != nil && had
		if ch.New != nil {
			is, err := after(ch.Path, had)
			if err != nil {
				return nil, err
			}
			if is {
				ch.Op = OpShadow
			}
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
		if _, touched := c.pend.files[d]; touched {
			continue
		}
		f, ok, err := c.file(d)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		was, err := c.under(d)
		if err != nil {
			return nil, err
		}
		is, err := after(d, was)
		if err != nil {
			return nil, err
		}
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
		return chs, nil
	}
	chs = append(chs, extra...)
	slices.SortFunc(chs, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return chs, nil
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
// may gain more paths under it: the cache holds the directory already. It
// reads, for each written entry, the first row under it, and the row of each
// directory above the entries.
func (c *Core) checkClash(entries []ledger.Entry) error {
	after := make(map[string]bool, len(entries)) // the entries' paths, true if written
	for _, en := range entries {
		after[en.Path] = !en.Deleted
	}
	paths := slices.Sorted(maps.Keys(after))
	fine := map[string]bool{} // directories above the entries found not to clash
	for _, en := range entries {
		if en.Deleted {
			continue
		}
		under, err := c.firstUnder(en.Path, paths, after)
		if err != nil {
			return err
		}
		if under != "" {
			return &ClashError{File: en.Path, Under: under}
		}
		for i := len(en.Path) - 1; i > 0; i-- {
			if en.Path[i] != '/' {
				continue
			}
			a := en.Path[:i]
			if fine[a] {
				continue
			}
			_, held, err := c.file(a)
			if err != nil {
				return err
			}
			if w, ok := after[a]; ok {
				held = w
			}
			if held {
				shadowed, err := c.Shadowed(a)
				if err != nil {
					return err
				}
				if !shadowed {
					return &ClashError{File: a, Under: en.Path}
				}
			}
			fine[a] = true
		}
	}
	return nil
}

// firstUnder returns the first path under dir that the index holds once the
// commit's entries (paths, sorted; after: path → written) are applied; "" if
// none.
func (c *Core) firstUnder(dir string, paths []string, after map[string]bool) (string, error) {
	pre := dir + "/"
	var first string
	i, _ := slices.BinarySearch(paths, pre)
	for ; i < len(paths) && strings.HasPrefix(paths[i], pre); i++ {
		if after[paths[i]] {
			first = paths[i]
			break
		}
	}
	err := c.files(pre, func(p string, _ File) bool {
		if w, ok := after[p]; ok && !w {
			return true // deleted by the commit
		}
		if first == "" || p < first {
			first = p
		}
		return false
	})
	return first, err
}

// Package ignore decides which files of a cache never sync.
//
// Three sets of rules, in gitignore syntax, are read by go-git's gitignore
// matcher (github.com/go-git/go-git/v5/plumbing/format/gitignore):
//
//   - Forced: swamp's local-only files (its SQLite databases and their journals,
//     its secrets and its extension bundles) and nested state directories. They
//     are always ignored: no rule can re-include them.
//   - Defaults: editor swap and backup files and the temp files of atomic
//     writers.
//   - The cache's own .syncledgerignore at its root, which comes after the
//     defaults and so can re-include ("!pattern") what they ignore.
//
// An ignored file is never scanned, committed, or overwritten by a sync.
//
// Matching gitignore patterns is costly (go-git globs every pattern against every
// path component), so a Matcher keeps, for each file name it has seen, which of
// the name-only patterns (no slash) match it; only patterns with a slash are
// matched against the whole path each time. The answers are go-git's exactly
// (TestMatchAgreesWithGoGit).
package ignore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/syncledger/syncledger/ledger"
)

// FileName is the ignore file at the cache root (ledger.IgnoreFile: no
// entry of a ledger may make it a directory).
const FileName = ledger.IgnoreFile

// Forced are the patterns no rule can re-include: swamp's local-only files
// (SQLite databases such as _extension_catalog.db and run_tracker.db, with their
// WAL, shared-memory and journal files; the secrets of local vaults; cached
// extension bundles) and the state directory of a nested cache.
var Forced = []string{
	"*.db",
	"*.db-wal",
	"*.db-shm",
	"*.db-journal",
	"run_tracker.db*",
	"/secrets/",
	"/bundles/",
	"/*-bundles/",
	".syncledger/",
}

// Defaults are the patterns ignored unless .syncledgerignore re-includes them:
// editor swap, backup and lock files, and the temp files of atomic writers.
// A pattern here must never match a name swamp gives its data: vim's probe file
// "4913" is left out because swamp numbers its data versions (…/raw/4913 is
// version 4913), and a bare name matches directories too.
var Defaults = []string{
	".*.sw[a-p]", // vim swap files
	"*~",         // backups (vim, emacs, nano)
	".#*",        // emacs lock files
	"#*#",        // emacs auto-save files
	".~lock.*#",  // LibreOffice lock files
	"*.tmp",      // temp files
	"*.tmp-*",    // temp files of atomic writers (name.tmp-PID)
	".DS_Store",
}

// Matcher answers whether a cache path is ignored. It is safe for concurrent
// use.
type Matcher struct {
	forced, user *set
}

// New returns a Matcher for the forced rules, the defaults and then lines (the
// content of a .syncledgerignore, one pattern per line; blank lines and lines
// starting with # are skipped, as git does).
func New(lines []string) *Matcher {
	return &Matcher{forced: newSet(Forced), user: newSet(append(append([]string(nil), Defaults...), lines...))}
}

// Load returns the Matcher of the cache at root: its .syncledgerignore, if it has
// one, after the defaults.
func Load(root string) (*Matcher, error) {
	b, err := os.ReadFile(filepath.Join(root, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return New(nil), nil
	}
	if err != nil {
		if fi, serr := os.Lstat(filepath.Join(root, FileName)); serr == nil && fi.IsDir() {
			// No ledger makes it one (ledger.ValidatePath): a user did, or a
			// commit an older release applied.
			return nil, fmt.Errorf("read %s: it is a directory, not the cache's file of ignore rules: move it out of the cache %s: %w", FileName, root, err)
		}
		return nil, fmt.Errorf("read %s: %w", FileName, err)
	}
	return New(strings.Split(string(b), "\n")), nil
}

// Match reports whether rel (slash-separated, relative to the cache root) is
// ignored by the rules themselves, not looking at its parent directories: a walk
// that does not descend into ignored directories asks this of each entry. It is
// what go-git's matcher answers for the same rules.
func (m *Matcher) Match(rel string, isDir bool) bool {
	var buf [16]string // a walk asks this of every entry: no allocation for the usual depths
	path := splitPath(rel, buf[:0])
	if m.forced.match(path, isDir) {
		return true
	}
	return m.user.match(path, isDir)
}

// splitPath is strings.Split(rel, "/") appended to buf.
func splitPath(rel string, buf []string) []string {
	for {
		i := strings.IndexByte(rel, '/')
		if i < 0 {
			return append(buf, rel)
		}
		buf, rel = append(buf, rel[:i]), rel[i+1:]
	}
}

// Ignored reports whether the file rel is ignored, itself or through one of its
// parent directories (as a walk that skips ignored directories sees it).
func (m *Matcher) Ignored(rel string) bool {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && m.Match(rel[:i], true) {
			return true
		}
	}
	return m.Match(rel, false)
}

// Forced reports whether rel is ignored by a rule no .syncledgerignore can
// override, itself or through a parent directory.
func (m *Matcher) Forced(rel string) bool {
	path := strings.Split(rel, "/")
	for i := 1; i < len(path); i++ {
		if m.forced.match(path[:i], true) {
			return true
		}
	}
	return m.forced.match(path, false)
}

// forcedSet is the Forced rules alone, made on first use.
var forcedSet = sync.OnceValue(func() *set { return newSet(Forced) })

// IsForced reports whether rel is ignored by the Forced rules, itself or
// through a parent directory, whatever a cache's .syncledgerignore says: a sync
// never writes or removes such a path (another host may have published one
// before it was ignored). Most paths are answered without matching.
func IsForced(rel string) bool {
	if !strings.Contains(rel, ".db") && !strings.Contains(rel, ".syncledger") && !strings.Contains(rel, "bundles/") &&
		!strings.HasPrefix(rel, "secrets/") {
		return false // no Forced pattern can match
	}
	return (&Matcher{forced: forcedSet()}).Forced(rel)
}

// set is an ordered list of patterns (increasing priority) with the per-name
// cache of its name-only patterns.
type set struct {
	pats []pat

	mu    sync.Mutex
	names map[string]nameBits // file name → which name-only patterns match it
}

// pat is one pattern: a name-only one is matched through the name cache (bit
// is its index there); any other goes to go-git.
type pat struct {
	gg        gitignore.Pattern
	nameOnly  bool
	glob      string // name-only: the pattern go-git globs each component with
	bit       int
	dirOnly   bool
	inclusion bool
}

// nameBits says, for one name, which name-only patterns glob-match it and
// which report a malformed pattern (go-git then stops: no match).
type nameBits struct{ match, bad []uint64 }

// maxNames bounds the name cache; past it the cache starts over. The names
// that repeat in a cache (raw, latest, data, a type's directories) stay
// cached; the unique ones (model ids, versions) miss whatever the size, and
// at 1 << 16 the cache held 20 MB of them through a bulk commit.
const maxNames = 1 << 12

func newSet(lines []string) *set {
	s := &set{names: map[string]nameBits{}}
	bits := 0
	for _, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		// As go-git's ReadPatterns: comments and blank lines are not patterns.
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		p := pat{gg: gitignore.ParsePattern(line, nil)}
		// Classify the pattern the way go-git parses it.
		raw := line
		if strings.HasPrefix(raw, "!") {
			p.inclusion, raw = true, raw[1:]
		}
		if !strings.HasSuffix(raw, "\\ ") {
			raw = strings.TrimRight(raw, " ")
		}
		if strings.HasSuffix(raw, "/") {
			p.dirOnly, raw = true, raw[:len(raw)-1]
		}
		if !strings.Contains(raw, "/") {
			p.nameOnly, p.glob, p.bit = true, raw, bits
			bits++
		}
		s.pats = append(s.pats, p)
	}
	return s
}

// bitsOf returns the name-only patterns' answers for name.
func (s *set) bitsOf(name string) nameBits {
	if nb, ok := s.names[name]; ok {
		return nb
	}
	var nb nameBits
	for _, p := range s.pats {
		if !p.nameOnly {
			continue
		}
		ok, err := filepath.Match(p.glob, name)
		if err != nil {
			nb.bad = setBit(nb.bad, p.bit)
		} else if ok {
			nb.match = setBit(nb.match, p.bit)
		}
	}
	if len(s.names) >= maxNames {
		clear(s.names)
	}
	s.names[name] = nb
	return nb
}

func setBit(b []uint64, i int) []uint64 {
	for len(b) <= i/64 {
		b = append(b, 0)
	}
	b[i/64] |= 1 << (i % 64)
	return b
}

func hasBit(b []uint64, i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// match is go-git's Matcher.Match: the last pattern that matches decides.
func (s *set) match(path []string, isDir bool) bool {
	if len(s.pats) == 0 {
		return false
	}
	var buf [16]nameBits
	var comps []nameBits
	for i := len(s.pats) - 1; i >= 0; i-- {
		p := &s.pats[i]
		var hit bool
		if p.nameOnly {
			if comps == nil {
				comps = buf[:0]
				if len(path) > len(buf) {
					comps = make([]nameBits, 0, len(path))
				}
				comps = comps[:len(path)]
				s.mu.Lock()
				for j, name := range path {
					comps[j] = s.bitsOf(name)
				}
				s.mu.Unlock()
			}
			hit = p.nameMatch(comps, isDir)
		} else {
			hit = p.gg.Match(path, isDir) != gitignore.NoMatch
		}
		if hit {
			return !p.inclusion
		}
	}
	return false
}

// nameMatch is go-git's simpleNameMatch over the cached answers: the first
// component the pattern globs decides.
func (p *pat) nameMatch(comps []nameBits, isDir bool) bool {
	for j, nb := range comps {
		if hasBit(nb.bad, p.bit) {
			return false
		}
		if !hasBit(nb.match, p.bit) {
			continue
		}
		return !(p.dirOnly && !isDir && j == len(comps)-1)
	}
	return false
}

package ignore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// goGit is the reference: go-git's own matcher over the same lines.
func goGit(lines []string) gitignore.Matcher {
	var ps []gitignore.Pattern
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(l, nil))
	}
	return gitignore.NewMatcher(ps)
}

// TestMatchAgreesWithGoGit compares the cached matcher with go-git's on 20,000
// random paths against random rule files (names, globs, anchored and **
// patterns, directory-only and negated ones, malformed ones).
func TestMatchAgreesWithGoGit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "raw", "data", "secrets", "x.db", "x.db-wal", "run_tracker.db-shm", ".raw.swp",
		"raw.tmp-123", "notes~", ".#lock", "build", "keep.txt", "drv-bundles", "bundles", ".syncledger", "v1", "[x", "a.log"}
	frags := []string{"*", "a", "b", "raw", "*.log", "build", "keep.txt", "data", "[ab]", "?", "v*", "[x", "x.db"}
	randPattern := func() string {
		var b strings.Builder
		if rng.IntN(4) == 0 {
			b.WriteString("!")
		}
		if rng.IntN(4) == 0 {
			b.WriteString("/")
		}
		n := 1 + rng.IntN(3)
		for i := range n {
			if i > 0 {
				b.WriteString("/")
			}
			if rng.IntN(6) == 0 {
				b.WriteString("**")
			} else {
				b.WriteString(frags[rng.IntN(len(frags))])
			}
		}
		if rng.IntN(3) == 0 {
			b.WriteString("/")
		}
		return b.String()
	}
	checked := 0
	for round := range 40 {
		var lines []string
		for range 1 + rng.IntN(12) {
			lines = append(lines, randPattern())
		}
		if round%5 == 0 {
			lines = append(lines, "# comment", "", "  ")
		}
		m := New(lines)
		forced, user := goGit(Forced), goGit(append(append([]string(nil), Defaults...), lines...))
		for range 500 {
			depth := 1 + rng.IntN(5)
			path := make([]string, depth)
			for i := range path {
				path[i] = names[rng.IntN(len(names))]
			}
			isDir := rng.IntN(3) == 0
			want := forced.Match(path, isDir) || user.Match(path, isDir)
			if got := m.Match(strings.Join(path, "/"), isDir); got != want {
				t.Fatalf("rules %q: Match(%q, dir=%v) = %v, go-git says %v", lines, strings.Join(path, "/"), isDir, got, want)
			}
			checked++
		}
	}
	if checked != 20000 {
		t.Fatalf("checked %d paths, want 20000", checked)
	}
}

func TestRules(t *testing.T) {
	m := New([]string{"notes/", "!*.tmp", "!*.db", "!secrets/", "!/drv-bundles/", "*.log", "!keep.log"})
	for _, c := range []struct {
		path string
		want bool
	}{
		{".raw.swp", true},
		{"data/x/.raw.swp", true},
		{"data/x/raw~", true},
		{"data/x/raw.tmp-123", true},
		{"data/x/.#raw", true},
		{"data/x/raw", false},
		// swamp numbers data versions: no default may take a number (vim's probe file
		// "4913" once did, and with it version 4913 of every model).
		{"data/command/shell/vpc/result/4913/raw", false},
		{"data/t/m113/d/4913", false},
		{"data/x/raw.tmp", false}, // re-included by !*.tmp
		{"notes/a.txt", true},     // through its directory
		{"x.log", true},
		{"keep.log", false},
		// swamp's local-only files cannot be re-included.
		{"_extension_catalog.db", true},
		{"run_tracker.db", true},
		{"run_tracker.db-wal", true},
		{"data/a.db-shm", true},
		{"x.db-journal", true},
		{"secrets/vault/key", true},
		{"drv-bundles/h/x.js", true},
		{"bundles/h/x.js", true},
		{"data/aws/secrets/v1/raw", false}, // only the top-level secrets/ is swamp's
		{"sub/.syncledger/state.db", true},
		{"sub/.syncledger/other", true},
		{".syncledgerignore", false},
	} {
		if got := m.Ignored(c.path); got != c.want {
			t.Errorf("Ignored(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if !m.Forced("secrets/x") || m.Forced("x.log") {
		t.Errorf("Forced: secrets/x %v, x.log %v", m.Forced("secrets/x"), m.Forced("x.log"))
	}
	// IsForced's shortcut never misses what the Forced rules match.
	for _, p := range []string{"a.db", "d/run_tracker.db-wal", "x/.syncledger/state.db", "x/.syncledger/tmp/f",
		"secrets/k", "drv-bundles/a", "bundles/a", "a.db-journal", "data/a/raw", "dbx", "secretsx/a", "x/secrets/a", "x/bundles/a"} {
		if got, want := IsForced(p), New(nil).Forced(p); got != want {
			t.Errorf("IsForced(%q) = %v, Forced says %v", p, got, want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	m, err := Load(dir)
	if err != nil || !m.Ignored("a~") || m.Ignored("a") {
		t.Fatalf("no file: err %v, a~ %v, a %v", err, m.Ignored("a~"), m.Ignored("a"))
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("# mine\r\n*.bak\r\n!a~\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = Load(dir)
	if err != nil || !m.Ignored("x.bak") || m.Ignored("a~") || !m.Ignored("b~") {
		t.Fatalf("with file: err %v, x.bak %v, a~ %v, b~ %v", err, m.Ignored("x.bak"), m.Ignored("a~"), m.Ignored("b~"))
	}
}

// TestLoadDirectory: a .syncledgerignore that is a directory (no ledger makes
// one any more, ledger.ValidatePath; a user, or a commit an older release
// applied, did) is an error that says so and what to do, not only "is a
// directory".
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, FileName, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "it is a directory, not the cache's file of ignore rules: move it out of the cache") {
		t.Fatalf("Load with a directory: %v", err)
	}
}

// TestNameCacheBounded: the cache starts over past maxNames names.
func TestNameCacheBounded(t *testing.T) {
	m := New(nil)
	for i := range maxNames + 10 {
		m.Match(fmt.Sprintf("d/f%d", i), false)
	}
	if n := len(m.user.names); n > maxNames {
		t.Fatalf("name cache holds %d names, bound %d", n, maxNames)
	}
}

// benchPaths are swamp-shaped paths: many directories, names that repeat.
func benchPaths() []string {
	var out []string
	for i := range 2000 {
		out = append(out, fmt.Sprintf("data/aws/ec2/vpc-%d/v%d/raw", i%200, i), fmt.Sprintf("data/aws/ec2/vpc-%d/v%d/meta.json", i%200, i))
	}
	return out
}

var userRules = []string{"*.bak", "/scratch/", "logs/**/*.gz", "!keep.bak"}

func BenchmarkMatch(b *testing.B) {
	paths := benchPaths()
	m := New(userRules)
	b.ResetTimer()
	for i := range b.N {
		m.Match(paths[i%len(paths)], false)
	}
}

func BenchmarkMatchGoGit(b *testing.B) {
	paths := benchPaths()
	forced, user := goGit(Forced), goGit(append(append([]string(nil), Defaults...), userRules...))
	split := make([][]string, len(paths))
	for i, p := range paths {
		split[i] = strings.Split(p, "/")
	}
	b.ResetTimer()
	for i := range b.N {
		p := split[i%len(split)]
		_ = forced.Match(p, false) || user.Match(p, false)
	}
}

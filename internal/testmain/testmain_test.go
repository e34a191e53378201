package testmain

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// The temporary directory of a test is under the one Setup chose, and a TMPDIR
// set beforehand wins.
func TestSetup(t *testing.T) {
	dir := t.TempDir()
	if want := os.TempDir(); len(dir) < len(want) || dir[:len(want)] != want {
		t.Fatalf("t.TempDir() = %s, not under os.TempDir() %s", dir, want)
	}
	t.Setenv("TMPDIR", dir)
	if got := Setup(); got != dir {
		t.Fatalf("Setup with TMPDIR=%s chose %s", dir, got)
	}
	t.Logf("/dev/shm usable: %v", usable("/dev/shm"))
}

// Every package with tests runs them through testmain (bench excepted: its
// Go benchmarks measure the machine's own temporary directory), so a new
// package does not quietly run its tests on a slow disk.
func TestEveryPackageUsesIt(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch d.Name() {
		case ".git", "node_modules", "testdata":
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "bench" || rel == filepath.Join("internal", "testmain") {
			return nil
		}
		tests, _ := filepath.Glob(filepath.Join(p, "*_test.go"))
		if len(tests) == 0 {
			return nil
		}
		for _, f := range tests {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "testmain.Main(m)") || strings.Contains(string(b), "testmain.Setup()") {
				return nil
			}
		}
		t.Errorf("%s has tests but no TestMain calling testmain.Main (add main_test.go: func TestMain(m *testing.M) { testmain.Main(m) })", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Parallel raises the default of -test.parallel and keeps what the command
// line set, lower or higher.
func TestParallel(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "4"},
		{[]string{"-test.parallel=1"}, "1"},
		{[]string{"-test.parallel=8"}, "8"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.Int("test.parallel", 2, "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		raise(fs, 4)
		if got := fs.Lookup("test.parallel").Value.String(); got != tc.want {
			t.Errorf("args %v: test.parallel %s, want %s", tc.args, got, tc.want)
		}
	}
}

package projector

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedImports is everything the pure core may import: no os, net, time, io,
// sync, log, math/rand, crypto/rand … so it cannot do I/O, read a clock, start
// goroutines, share memory or draw random numbers.
var allowedImports = map[string]bool{
	"cmp":     true,
	"errors":  true,
	"fmt":     true,
	"iter":    true,
	"maps":    true,
	"slices":  true,
	"sort":    true,
	"strconv": true,
	"strings": true,
	"github.com/syncledger/syncledger/ledger": true,
}

func TestCoreIsPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowedImports[path] {
				t.Errorf("%s imports %q: the projector core must stay pure (allowed: %v)", fset.Position(imp.Pos()), path, slices.Sorted(maps.Keys(allowedImports)))
			}
		}
		full, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(full, func(n ast.Node) bool {
			switch n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement in the pure core", fset.Position(n.Pos()))
			case *ast.ChanType, *ast.SendStmt, *ast.SelectStmt:
				t.Errorf("%s: channel use in the pure core", fset.Position(n.Pos()))
			}
			return true
		})
		checked++
	}
	if checked < 5 {
		t.Fatalf("checked only %d non-test files: is the test running in the package directory?", checked)
	}
}

package projector

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// impure names the calls that do I/O, read a clock, sleep, draw random numbers
// or make ids: package → functions (nil: every function of the package).
var impure = map[string][]string{
	"time":    {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"},
	"rand":    nil, // math/rand, math/rand/v2, crypto/rand
	"os":      nil,
	"net":     nil,
	"http":    nil,
	"exec":    nil,
	"syscall": nil,
	"uuid":    nil,
	"io":      {"ReadFull", "ReadAll", "Copy", "CopyN", "CopyBuffer"},
}

// TestCoreReachesNoIO is the purity fence one level down: the core may import
// ledger (TestCoreIsPure), but of ledger it may reach only code that is pure
// too. It starts from every ledger function the core calls and every method of
// the ledger types it uses, follows the calls inside ledger (by name, which
// over-approximates), and fails on any call of an impure function (impure) or
// any go statement on the way. Without it, ledger's I/O (the retrying blob
// store, ids, blob reads) would be one call away from the core.
func TestCoreReachesNoIO(t *testing.T) {
	fset := token.NewFileSet()
	parse := func(glob string) []*ast.File {
		names, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		var out []*ast.File
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, n, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
		return out
	}
	core, lg := parse("*.go"), parse(filepath.Join("..", "ledger", "*.go"))
	if len(lg) < 5 {
		t.Fatalf("parsed %d files of ledger: is the test running in the package directory?", len(lg))
	}

	// Every function and method of ledger, by name; methods also by receiver type.
	funcs := map[string][]*ast.FuncDecl{}
	methodsOf := map[string][]string{}
	for _, f := range lg {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs[fd.Name.Name] = append(funcs[fd.Name.Name], fd)
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				typ := fd.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					methodsOf[id.Name] = append(methodsOf[id.Name], fd.Name.Name)
				}
			}
		}
	}

	// The roots: ledger.X in the core, and the methods of each such X.
	var todo []string
	for _, f := range core {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "ledger" {
					todo = append(todo, sel.Sel.Name)
					todo = append(todo, methodsOf[sel.Sel.Name]...)
				}
			}
			return true
		})
	}
	if len(todo) < 10 {
		t.Fatalf("the core uses %d ledger names: the scan is broken", len(todo))
	}

	seen := map[string]bool{}
	via := map[string]string{} // how a function was reached, for the message
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, fd := range funcs[name] {
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: the core reaches a go statement in ledger's %s (via %s)", fset.Position(n.Pos()), name, path(via, name))
				case *ast.CallExpr:
					var callee string
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						callee = fn.Name
					case *ast.SelectorExpr:
						callee = fn.Sel.Name
						if pkg, ok := fn.X.(*ast.Ident); ok {
							if fns, bad := impure[pkg.Name]; bad && (fns == nil || slices.Contains(fns, callee)) {
								t.Errorf("%s: the core reaches %s.%s in ledger's %s (via %s)", fset.Position(n.Pos()), pkg.Name, callee, name, path(via, name))
							}
						}
					}
					if _, ok := funcs[callee]; ok && !seen[callee] {
						if _, ok := via[callee]; !ok {
							via[callee] = name
						}
						todo = append(todo, callee)
					}
				}
				return true
			})
		}
	}
	if !t.Failed() {
		t.Logf("%d ledger functions reachable from the core, all pure", len(seen))
	}
}

// path renders the chain of calls that reached name.
func path(via map[string]string, name string) string {
	chain := []string{name}
	for p, ok := via[name]; ok && len(chain) < 20; p, ok = via[p] {
		chain = append(chain, p)
	}
	slices.Reverse(chain)
	return "core → " + strings.Join(chain, " → ")
}

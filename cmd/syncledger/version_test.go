package main

import (
	"debug/buildinfo"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestNATSServerVersion: the version and --listen default the default build
// states without linking nats-server are the server build's. The test binary
// does not link nats-server either: the version is read from the server build
// TestMain made, and embedded.DefaultListen from its source.
func TestNATSServerVersion(t *testing.T) {
	t.Parallel()
	bi, err := buildinfo.ReadFile(filepath.Join(filepath.Dir(binPath), serverBinary))
	if err != nil {
		t.Fatal(err)
	}
	linked := ""
	for _, d := range bi.Deps {
		if d.Path == "github.com/nats-io/nats-server/v2" {
			linked = d.Version
		}
	}
	if linked != "v"+natsServerVersion {
		t.Errorf("natsServerVersion = %q, the server build links nats-server %q: update version.go", natsServerVersion, linked)
	}
	if got := embeddedConst(t, "DefaultListen"); defaultListen != got {
		t.Errorf("defaultListen = %q, embedded.DefaultListen = %q", defaultListen, got)
	}
}

// embeddedConst returns the string constant name declared in package embedded.
func embeddedConst(t *testing.T, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "..", "embedded", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded's sources: %v %v", files, err)
	}
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if obj := file.Scope.Lookup(name); obj != nil && obj.Kind == ast.Con {
			if v, ok := obj.Decl.(*ast.ValueSpec).Values[0].(*ast.BasicLit); ok && v.Kind == token.STRING {
				return constant.StringVal(constant.MakeFromLiteral(v.Value, v.Kind, 0))
			}
		}
	}
	t.Fatalf("no string constant %s in embedded", name)
	return ""
}

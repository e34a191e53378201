package agent

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProtocolTypeScript: the extension's protocol block (PROTOCOL, one
// request and one result type per operation) is what protocol.go says. The
// extension's calls are typed by it, so the deno tests' type check fails
// where the extension sends or reads what the agent does not.
// `go generate ./swamp/agent` rewrites the block (./tsgen).
func TestProtocolTypeScript(t *testing.T) {
	src, err := os.ReadFile(ExtensionFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := GenerateTypeScript(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Errorf("the extension's protocol differs from protocol.go (-ts +go); run `go generate ./swamp/agent`:\n%s", cmp.Diff(string(src), string(got)))
	}
}

// TestProtocolOperations: every operation has one request and one result
// type, decodes what its request type encodes, and is listed once.
func TestProtocolOperations(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range operations {
		if seen[o.name] {
			t.Errorf("operation %q listed twice", o.name)
		}
		seen[o.name] = true
		if o.req.Kind() != reflect.Struct {
			t.Errorf("%s: request %v is not a struct", o.name, o.req)
		}
		if (o.run == nil) != (o.res == nil) {
			t.Errorf("%s: a notification has no result and no handler; an operation both", o.name)
		}
	}
}

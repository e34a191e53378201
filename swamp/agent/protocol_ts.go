package agent

import (
	"bytes"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
)

// ExtensionFile is the extension's source, relative to this package's
// directory: its protocol block is generated from this package's protocol
// (GenerateTypeScript; `go generate ./swamp/agent` runs ./tsgen).
const ExtensionFile = "../extension/syncledger.ts"

const (
	beginMark = "// BEGIN protocol: generated from swamp/agent/protocol.go by `go generate ./swamp/agent`; do not edit.\n"
	endMark   = "// END protocol\n"
)

// GenerateTypeScript returns src, the extension's source, with its protocol
// block (PROTOCOL, one request and one result type per operation) rendered
// from this package's protocol: the agent's requests and results as the
// extension types them. An error if src has no block.
func GenerateTypeScript(src []byte) ([]byte, error) {
	i, j := bytes.Index(src, []byte(beginMark)), bytes.Index(src, []byte(endMark))
	if i < 0 || j < i {
		return nil, fmt.Errorf("the extension's source has no generated protocol block (%q … %q)", beginMark, endMark)
	}
	out := append(bytes.Clone(src[:i+len(beginMark)]), typeScript()...)
	return append(out, src[j:]...), nil
}

// typeScript renders the protocol as TypeScript.
func typeScript() string {
	var (
		b     strings.Builder
		named []reflect.Type
		seen  = map[reflect.Type]bool{}
	)
	var ts func(t reflect.Type) string
	ts = func(t reflect.Type) string {
		switch t.Kind() {
		case reflect.Bool:
			return "boolean"
		case reflect.String:
			return "string"
		case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Float64:
			return "number"
		case reflect.Interface:
			return "unknown"
		case reflect.Pointer:
			return ts(t.Elem()) + " | null"
		case reflect.Slice:
			if t.Elem().Kind() == reflect.Uint8 {
				return "string | null" // base64; null for nil
			}
			e := ts(t.Elem())
			if strings.Contains(e, " ") {
				e = "(" + e + ")"
			}
			return e + "[]"
		case reflect.Struct:
			if !seen[t] {
				seen[t] = true
				for f := range fields(t) {
					if f.Tag.Get("ts") == "" {
						ts(f.Type)
					}
				}
				named = append(named, t)
			}
			return t.Name()
		}
		panic(fmt.Sprintf("no TypeScript type for %v", t))
	}
	var reqs, results, notes strings.Builder
	for _, o := range operations {
		line := fmt.Sprintf("  %q: %s;\n", o.name, ts(o.req))
		if o.res == nil {
			notes.WriteString(line)
			continue
		}
		reqs.WriteString(line)
		fmt.Fprintf(&results, "  %q: %s;\n", o.name, ts(o.res))
	}
	ts(reflect.TypeFor[Request]())
	ts(reflect.TypeFor[Response]())

	fmt.Fprintf(&b, "/** The agent protocol (agent.Protocol in Go). */\nexport const PROTOCOL = %d;\n", Protocol)
	for _, t := range named {
		if len(slices.Collect(fields(t))) == 0 {
			fmt.Fprintf(&b, "export type %s = Record<never, never>;\n", t.Name())
			continue
		}
		fmt.Fprintf(&b, "export type %s = {", t.Name())
		for f := range fields(t) {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			typ := f.Tag.Get("ts")
			if typ == "" {
				typ = ts(f.Type)
			}
			opt := ""
			if strings.Contains(opts, "omitempty") {
				opt = "?"
			}
			fmt.Fprintf(&b, "\n  %s%s: %s;", name, opt, typ)
		}
		b.WriteString("\n};\n")
	}
	fmt.Fprintf(&b, "/** Each operation's request, besides id and op. */\nexport type Requests = {\n%s};\n", reqs.String())
	fmt.Fprintf(&b, "/** Each operation's result. */\nexport type Results = {\n%s};\n", results.String())
	fmt.Fprintf(&b, "/** Requests that get no answer. */\nexport type Notifications = {\n%s};\n", notes.String())
	b.WriteString("export type Op = keyof Requests;\n")
	return b.String()
}

// fields yields t's fields that JSON encodes.
func fields(t reflect.Type) iter.Seq[reflect.StructField] {
	return func(yield func(reflect.StructField) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if f.Tag.Get("json") == "" {
				panic(fmt.Sprintf("%v.%s has no json tag", t, f.Name))
			}
			if !yield(f) {
				return
			}
		}
	}
}

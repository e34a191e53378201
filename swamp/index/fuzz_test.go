package index

import (
	"bytes"
	"testing"
)

// The parsers must never panic, and whatever they accept must encode to bytes
// they accept again, unchanged.

func seeds(f *testing.F, rels ...string) {
	for _, rel := range rels {
		b, err := readFixtureF(rel)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`{}`, `[]`, `null`, `{"version":1,"entries":{}}`, `{"version":2,"partitions":[],"commitSeq":0}`,
		`{"version":1,"entries":{"a":{"size":1e3}}}`, `{"version":1,"entries":{"a":{"size":9223372036854775808}}}`} {
		f.Add([]byte(s))
	}
}

func FuzzParseShard(f *testing.F) {
	seeds(f, "v2/_index/audit.json", "v2/_index/_root.json", "v2/_index/data--aws--ec2--vpc--abc-123.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, err := ParseShard(b)
		if err != nil {
			return
		}
		enc, err := EncodeShard(sh)
		if err != nil {
			t.Fatalf("accepted shard does not encode: %v", err)
		}
		again, err := ParseShard(enc)
		if err != nil {
			t.Fatalf("encoded shard does not parse: %v\n%s", err, enc)
		}
		enc2, _ := EncodeShard(again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("shard not stable:\n%s\n%s", enc, enc2)
		}
	})
}

func FuzzParseMeta(f *testing.F) {
	seeds(f, "v2/_index/_meta.json", "v1/_index/_meta.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeta(b)
		if err != nil {
			return
		}
		enc, err := EncodeMeta(m)
		if err != nil {
			t.Fatalf("accepted meta does not encode: %v", err)
		}
		again, err := ParseMeta(enc)
		if err != nil {
			t.Fatalf("encoded meta does not parse: %v\n%s", err, enc)
		}
		if again.Version != m.Version || again.CommitSeq != m.CommitSeq || len(again.Partitions) > len(m.Partitions) {
			t.Fatalf("meta changed: %+v → %+v", m, again)
		}
	})
}

func FuzzParseMonolith(f *testing.F) {
	seeds(f, "v1/.datastore-index.json", "v2/.datastore-index.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMonolith(b)
		if err != nil {
			return
		}
		enc, err := EncodeMonolith(m)
		if err != nil {
			t.Fatalf("accepted monolith does not encode: %v", err)
		}
		if _, err := ParseMonolith(enc); err != nil {
			t.Fatalf("encoded monolith does not parse: %v\n%s", err, enc)
		}
	})
}

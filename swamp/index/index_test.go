package index

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseFixtures(t *testing.T) {
	meta, err := ParseMeta(readFixture(t, "v2/_index/_meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if meta.Version != MetaV2 || meta.CommitSeq != 7 || len(meta.Partitions) != 9 {
		t.Fatalf("v2 meta = %+v", meta)
	}
	for _, p := range meta.Partitions {
		sh, err := ParseShard(readFixture(t, "v2/_index/"+p+".json"))
		if err != nil {
			t.Fatalf("shard %s: %v", p, err)
		}
		if len(sh.Entries) == 0 {
			t.Fatalf("shard %s: no entries", p)
		}
	}
	sh, err := ParseShard(readFixture(t, "v2/_index/audit.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{Key: "audit/2026-01-01.jsonl", Size: 30, LastModified: "2026-01-01T00:00:00.000Z", LocalMtime: "2026-01-01T00:00:00.000Z"}
	if diff := cmp.Diff(want, sh.Entries["audit/2026-01-01.jsonl"]); diff != "" {
		t.Fatalf("audit entry (-want +got):\n%s", diff)
	}
	v1, err := ParseMeta(readFixture(t, "v1/_index/_meta.json"))
	if err != nil || v1.Version != MetaV1 || v1.CommitSeq != 0 {
		t.Fatalf("v1 meta = %+v, %v", v1, err)
	}
	mono, err := ParseMonolith(readFixture(t, "v1/.datastore-index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mono.Entries) != 12 || mono.LastPulled == "" {
		t.Fatalf("monolith: %d entries, lastPulled %q", len(mono.Entries), mono.LastPulled)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) error
		in    string
		want  error
	}{
		{"shard v2", shardErr, `{"version":2,"entries":{}}`, ErrUnsupported},
		{"shard no version", shardErr, `{"entries":{}}`, ledger.ErrInvalid},
		{"shard no entries", shardErr, `{"version":1}`, ledger.ErrInvalid},
		{"shard array", shardErr, `[1]`, ledger.ErrInvalid},
		{"shard trailing", shardErr, `{"version":1,"entries":{}} {}`, ledger.ErrInvalid},
		{"shard key differs", shardErr, `{"version":1,"entries":{"a/b":{"key":"a/c","size":1}}}`, ledger.ErrInvalid},
		{"shard string size", shardErr, `{"version":1,"entries":{"a":{"size":"1"}}}`, ledger.ErrInvalid},
		{"shard negative size", shardErr, `{"version":1,"entries":{"a":{"size":-1}}}`, ledger.ErrInvalid},
		{"shard fractional size", shardErr, `{"version":1,"entries":{"a":{"size":1.5}}}`, ledger.ErrInvalid},
		{"shard no size", shardErr, `{"version":1,"entries":{"a":{"key":"a"}}}`, ledger.ErrInvalid},
		{"shard bad sha", shardErr, `{"version":1,"entries":{"a":{"size":1,"sha256":"xyz"}}}`, ledger.ErrInvalid},
		{"shard empty rel", shardErr, `{"version":1,"entries":{"":{"size":1}}}`, ledger.ErrInvalid},
		{"shard control rel", shardErr, `{"version":1,"entries":{"a\nb":{"size":1}}}`, ledger.ErrInvalid},
		{"meta v3", metaErr, `{"version":3,"partitions":[]}`, ErrUnsupported},
		{"meta v2 no seq", metaErr, `{"version":2,"partitions":[]}`, ledger.ErrInvalid},
		{"meta v2 string seq", metaErr, `{"version":2,"partitions":[],"commitSeq":"4"}`, ledger.ErrInvalid},
		{"meta no partitions", metaErr, `{"version":2,"commitSeq":1}`, ledger.ErrInvalid},
		{"meta slash partition", metaErr, `{"version":2,"partitions":["a/b"],"commitSeq":1}`, ledger.ErrInvalid},
		{"meta dotdot partition", metaErr, `{"version":2,"partitions":[".."],"commitSeq":1}`, ledger.ErrInvalid},
		{"monolith v2", monoErr, `{"version":2,"entries":{}}`, ErrUnsupported},
		{"monolith null entries", monoErr, `{"version":1,"entries":null}`, ledger.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.parse([]byte(tt.in)); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func shardErr(b []byte) error { _, err := ParseShard(b); return err }
func metaErr(b []byte) error  { _, err := ParseMeta(b); return err }
func monoErr(b []byte) error  { _, err := ParseMonolith(b); return err }

func TestLenient(t *testing.T) {
	sh, err := ParseShard([]byte(`{"version":1,"extra":true,"entries":{"a/b":{"size":3,"sha256":"` +
		strings.Repeat("AB", 32) + `","future":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := sh.Entries["a/b"]; e.Key != "a/b" || e.SHA256 != strings.Repeat("ab", 32) {
		t.Fatalf("entry = %+v", e)
	}
	m, err := ParseMeta([]byte(`{"version":2,"partitions":["b","a","b"],"commitSeq":0,"lastCompacted":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Meta{Version: 2, Partitions: []string{"b", "a"}, LastCompacted: "x"}, m); diff != "" {
		t.Fatalf("meta (-want +got):\n%s", diff)
	}
}

func TestRoundTrip(t *testing.T) {
	sh := Shard{Entries: map[string]Entry{
		"audit/x": {Key: "audit/x", Size: 4, LastModified: FormatTime(time.Unix(1, 5e6)), SHA256: strings.Repeat("0", 64)},
		"audit/y": {Key: "audit/y", Size: 0, LastModified: "t", LocalMtime: "m"},
	}}
	b, err := EncodeShard(sh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseShard(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sh, got); diff != "" {
		t.Fatalf("shard (-want +got):\n%s", diff)
	}
	if sh.Entries["audit/x"].LastModified != "1970-01-01T00:00:01.005Z" {
		t.Fatalf("FormatTime = %q", sh.Entries["audit/x"].LastModified)
	}
	meta := Meta{Version: MetaV2, Partitions: []string{"z", "a"}, CommitSeq: 9}
	b, err = EncodeMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := ParseMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Meta{Version: MetaV2, Partitions: []string{"a", "z"}, CommitSeq: 9}, gm); diff != "" {
		t.Fatalf("meta (-want +got):\n%s", diff)
	}
	mono := Monolith{LastPulled: "p", Entries: sh.Entries}
	b, err = EncodeMonolith(mono)
	if err != nil {
		t.Fatal(err)
	}
	gmono, err := ParseMonolith(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(mono, gmono); diff != "" {
		t.Fatalf("monolith (-want +got):\n%s", diff)
	}
	if _, err := EncodeShard(Shard{Entries: map[string]Entry{"a": {Key: "b"}}}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("EncodeShard with a wrong key: %v", err)
	}
	if _, err := EncodeMeta(Meta{Version: 3}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("EncodeMeta v3: %v", err)
	}
}

func TestLayout(t *testing.T) {
	solo, _ := NewLayout("")
	ns, err := NewLayout("team-a")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{solo.MetaKey(), solo.ShardKey("audit"), solo.MonolithKey(), solo.DataKey("a/b"), solo.ControlKey("x"),
		ns.MetaKey(), ns.ShardKey("audit"), ns.MonolithKey(), ns.DataKey("a/b"), ns.ControlKey("x")}
	want := []string{"_index/_meta.json", "_index/audit.json", ".datastore-index.json", "a/b", "_control/x",
		"team-a/_index/_meta.json", "team-a/_index/audit.json", "team-a/.datastore-index.json", "team-a/a/b", "team-a/_control/x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("keys (-want +got):\n%s", diff)
	}
	if rel, ok := ns.Rel("team-a/data/x"); !ok || rel != "data/x" {
		t.Fatalf("Rel = %q, %v", rel, ok)
	}
	if _, ok := ns.Rel("team-b/data/x"); ok {
		t.Fatal("Rel accepted another namespace's key")
	}
	for _, bad := range []string{"a/b", ".", "..", "a\x00"} {
		if _, err := NewLayout(bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("NewLayout(%q) = %v", bad, err)
		}
	}
	for rel, want := range map[string]string{"_index/audit.json": "audit", "_index/_meta.json": "", "_index/a/b.json": "", "audit/x.json": ""} {
		if p, _ := ShardPartition(rel); p != want {
			t.Errorf("ShardPartition(%q) = %q, want %q", rel, p, want)
		}
	}
}

func readFixtureF(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join("..", "testdata", filepath.FromSlash(rel)))
}

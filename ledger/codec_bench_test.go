package ledger

import (
	"testing"
	"time"
)

// BenchmarkDecodeEvent decodes and validates a one-file event, as every sync and
// replay does for each event it reads (bench/ B9).
func BenchmarkDecodeEvent(b *testing.B) {
	p := "data/@test/model-type-007/00000000-0000-4000-8000-000000000007/file-0001/1/raw"
	ev := Event{
		V: FormatVersion, Ledger: "0190a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b", Commit: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c",
		Host: "bench", At: time.Unix(1700000000, 0).UTC(), Partition: PartitionKey(p), ModelSeq: 9, Prev: 8, Parts: 1, Part: 1,
		Entries: []Entry{{Path: p, SHA256: DigestOf([]byte(p)), Size: 5120, Mode: 0o644}},
	}
	data, err := EncodeEvent(ev)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Decode", func(b *testing.B) { // the fast path
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeEvent(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeStrict", func(b *testing.B) { // encoding/json
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeEventStrict(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Validate", func(b *testing.B) {
		for b.Loop() {
			if err := ValidateEvent(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

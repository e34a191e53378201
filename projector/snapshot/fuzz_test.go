package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

// fuzzSnapshot is the seed snapshot of FuzzDecode.
func fuzzSnapshot() *Snapshot {
	d := ledger.DigestOf([]byte("content"))
	return &Snapshot{
		Ledger: "11111111-1111-4111-8111-111111111111", Name: "fuzz", Seq: 7,
		Marks: map[string]projector.Mark{"audit": {ModelSeq: 2, Seq: 5}, "data--t--m": {ModelSeq: 1, Seq: 7}},
		Entries: []Entry{
			{Path: "audit/a.log", SHA256: d, Size: 7, Mode: 0o644, Seq: 5},
			{Path: "audit/b.log", SHA256: d, Size: 7, Mode: 0o600, Seq: 2},
			{Path: "data/t/m/d/1/raw", SHA256: d, Size: 7, Mode: 0o644, Seq: 7},
		},
	}
}

// plainLines returns the uncompressed lines of an encoded snapshot, trailer
// included.
func plainLines(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// fuzzEncoder compresses fuzz inputs; EncodeAll is safe for concurrent use, and
// one encoder for the whole run keeps the fuzzer fast.
var fuzzEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))

func compress(b []byte) []byte { return fuzzEncoder.EncodeAll(b, nil) }

// withTrailer appends the trailer that makes body's lines check out, so the
// fuzzer reaches the parsing and validation behind the checksum.
func withTrailer(body []byte) []byte {
	if len(body) > 0 && body[len(body)-1] != '\n' {
		body = append(body, '\n')
	}
	sum := sha256.Sum256(body)
	tr, _ := json.Marshal(wireTrailer{End: kind, SHA256: hex.EncodeToString(sum[:])})
	return append(append(body, tr...), '\n')
}

// FuzzDecode feeds Decode three kinds of input, chosen by mode: raw bytes (mode
// 0: the compressed stream itself is hostile), the bytes as the uncompressed
// content (mode 1: lines with whatever trailer they carry), and the bytes as
// the lines before a trailer the test computes (mode 2: past the checksum, into
// strict parsing and Validate). Decode must never panic; every error wraps
// ErrInvalid, ErrChecksum or ErrUnknownVersion; and whatever decodes is valid,
// encodes, and decodes again to the same snapshot.
func FuzzDecode(f *testing.F) {
	var enc bytes.Buffer
	if err := Encode(&enc, fuzzSnapshot()); err != nil {
		f.Fatal(err)
	}
	lines := plainLines(f, enc.Bytes())
	body := lines[:bytes.LastIndex(lines[:len(lines)-1], []byte("\n"))+1]
	f.Add(uint8(0), enc.Bytes())
	f.Add(uint8(0), enc.Bytes()[:len(enc.Bytes())/2])
	f.Add(uint8(1), lines)
	f.Add(uint8(2), body)
	f.Add(uint8(2), bytes.Replace(body, []byte(`"v":1`), []byte(`"v":2`), 1))
	f.Add(uint8(2), bytes.Replace(body, []byte(`"entries":3`), []byte(`"entries":2`), 1))
	f.Add(uint8(2), bytes.Replace(body, []byte(`"seq":7,`), []byte(`"seq":4,`), 1))
	f.Add(uint8(2), []byte(`{"v":1,"kind":"syncledger-snapshot","ledger":"11111111-1111-4111-8111-111111111111","name":"","seq":0,"entries":0,"marks":0,"bytes":0}`+"\n"))
	f.Add(uint8(2), []byte(`{"v":1}`+"\n"))
	f.Add(uint8(1), []byte{})

	f.Fuzz(func(t *testing.T, mode uint8, b []byte) {
		var in []byte
		switch mode % 3 {
		case 0:
			in = b
		case 1:
			in = compress(b)
		case 2:
			in = compress(withTrailer(bytes.Clone(b)))
		}
		s, err := Decode(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ledger.ErrInvalid) && !errors.Is(err, ledger.ErrChecksum) && !errors.Is(err, ledger.ErrUnknownVersion) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("decoded an invalid snapshot: %v", err)
		}
		var again bytes.Buffer
		if err := Encode(&again, s); err != nil {
			t.Fatalf("decoded snapshot does not encode: %v", err)
		}
		s2, err := Decode(&again)
		if err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		if diff := cmp.Diff(s, s2); diff != "" {
			t.Fatalf("round trip changed the snapshot (-decoded +again):\n%s", diff)
		}
	})
}

package ledger

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The validation fast paths in codec.go must accept exactly what the
// definitions they stand in for accept.

func TestIsUUIDMatchesValidateUUID(t *testing.T) {
	t.Parallel()
	cases := []string{
		"", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190A1B2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
		"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5bb",
		"0190a1b2c3d4-7e5f-8a9b-0c1d2e3f4a5b-", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5g",
		"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5\n", "g190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789abcdefABCDEFg-\x00é"
	for range 20000 {
		b := []byte("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
		for range 1 + r.IntN(2) {
			b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
		}
		if r.IntN(10) == 0 {
			b = b[:r.IntN(len(b))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := isUUID(s), ValidateUUID(s) == nil; got != want {
			t.Errorf("isUUID(%q) = %v, ValidateUUID accepts: %v", s, got, want)
		}
	}
}

func TestEscapedLen(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "data--x--y", "~", "a.b c", "é", strings.Repeat("/", 10), "\x00\xff"} {
		if got, want := escapedLen(s), len(EscapeToken(s)); got != want {
			t.Errorf("escapedLen(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestValidateEntriesMatchesWireRoundTrip(t *testing.T) {
	t.Parallel()
	d := DigestOf([]byte("x"))
	for _, es := range [][]Entry{
		nil,
		{{Path: "a/b", SHA256: d, Size: 1, Mode: 0o644}},
		{{Path: "a/b", SHA256: d, Size: -1, Mode: 0o644}},
		{{Path: "a/b", SHA256: d, Size: 1, Mode: 0o1644}},
		{{Path: "a/b", Deleted: true}},
		{{Path: "a/b", Deleted: true, Size: -5, Mode: 0o7777, SHA256: d}}, // content fields of a deletion are not on the wire
		{{Path: "a/b", Deleted: true}, {Path: "a/b", SHA256: d, Size: 1, Mode: 0o644}},
		{{Path: "../x", SHA256: d, Size: 1, Mode: 0o644}},
		{{Path: "a/b", SHA256: d, Size: 1, Mode: 0o644}, {Path: "a/c", SHA256: d, Size: 2, Mode: 0o600}},
	} {
		_, werr := fromWire(toWire(es))
		err := validateEntries(es)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Errorf("validateEntries(%+v) = %v, the wire round trip says %v", es, err, werr)
		}
	}
}

package ledger

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	testLedger = "6f1c2a7e-1b2d-4c3e-8f40-5a6b7c8d9e0f"
	testCommit = "019a1b2c-3d4e-7f60-8a1b-2c3d4e5f6a7b"
)

func testEvent() Event {
	return Event{
		V: FormatVersion, Ledger: testLedger, Commit: testCommit, Host: "writer",
		At: time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC), Message: "run vpc",
		Partition: "data--aws--ec2--vpc--abc", ModelSeq: 7, Prev: 1234, Parts: 3, Part: 1,
		Entries: []Entry{
			{Path: "data/aws/ec2/vpc/abc/state/1/raw", SHA256: DigestOf([]byte("x")), Size: 1, Mode: 0o644},
			{Path: "data/aws/ec2/vpc/abc/state/1/old", Deleted: true},
		},
	}
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	e := testEvent()
	b, err := EncodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	for _, want := range []string{`"v":1`, `"modelSeq":7`, `"prev":1234`, `"deleted":true`, `"mode":420`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("encoding %s lacks %s", b, want)
		}
	}
}

func TestDecodeEventRejects(t *testing.T) {
	t.Parallel()
	good, err := EncodeEvent(testEvent())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("test setup: %q not in %s", old, good)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	tests := []struct {
		name, in string
		want     error
	}{
		{"not json", "{", ErrInvalid},
		{"empty", "", ErrInvalid},
		{"no version", `{"ledger":"x"}`, ErrInvalid},
		{"unknown version", edit(`"v":1`, `"v":2`), ErrUnknownVersion},
		{"version as string", edit(`"v":1`, `"v":"1"`), ErrInvalid},
		{"unknown field", edit(`"v":1`, `"v":1,"extra":true`), ErrInvalid},
		{"modelSeq wrong type", edit(`"modelSeq":7`, `"modelSeq":"7"`), ErrInvalid},
		{"negative prev", edit(`"prev":1234`, `"prev":-1`), ErrInvalid},
		{"modelSeq 0", edit(`"modelSeq":7`, `"modelSeq":0`), ErrInvalid},
		{"modelSeq 1 with prev", edit(`"modelSeq":7`, `"modelSeq":1`), ErrInvalid},
		{"part beyond parts", edit(`"part":1`, `"part":4`), ErrInvalid},
		{"bad ledger uuid", edit(testLedger, "not-a-uuid"), ErrInvalid},
		{"traversal path", edit(`data/aws/ec2/vpc/abc/state/1/raw`, `../../etc/passwd`), ErrInvalid},
		{"absolute path", edit(`data/aws/ec2/vpc/abc/state/1/raw`, `/etc/passwd`), ErrInvalid},
		{"state dir path", edit(`data/aws/ec2/vpc/abc/state/1/raw`, `.syncledger/state.db`), ErrInvalid},
		{"path of another partition", edit(`data/aws/ec2/vpc/abc/state/1/raw`, `data/aws/ec2/vpc/other/state/1/raw`), ErrInvalid},
		{"bad digest", edit(DigestOf([]byte("x")).String(), "abc"), ErrInvalid},
		{"write without sha", edit(`"sha256":"`+DigestOf([]byte("x")).String()+`",`, ``), ErrInvalid},
		{"deletion with size", edit(`"deleted":true`, `"deleted":true,"size":3`), ErrInvalid},
		{"mode beyond perms", edit(`"mode":420`, `"mode":2147484096`), ErrInvalid},
		{"negative size", edit(`"size":1`, `"size":-1`), ErrInvalid},
		{"trailing data", string(good) + `{}`, ErrInvalid},
		{"no entries", edit(`"entries":[`, `"x":[`), ErrInvalid},
		{"oversize", `{"v":1,"message":"` + strings.Repeat("a", MaxEventSize) + `"}`, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeEvent = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLongPartitionRejected(t *testing.T) {
	t.Parallel()
	e := testEvent()
	long := strings.Repeat("é", 400) // 800 bytes, escapes to 2400
	e.Partition = "data--t--" + long
	e.Entries = []Entry{{Path: "data/t/" + long + "/d/1/raw", SHA256: DigestOf(nil), Mode: 0o644}}
	if _, err := EncodeEvent(e); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("EncodeEvent with a %d-byte token = %v, want ErrTooLarge", len(EscapeToken(e.Partition)), err)
	}
}

func TestDuplicatePathRejected(t *testing.T) {
	t.Parallel()
	e := testEvent()
	e.Entries = append(e.Entries, e.Entries[0])
	if _, err := EncodeEvent(e); !errors.Is(err, ErrInvalid) {
		t.Fatalf("EncodeEvent with duplicate path = %v, want ErrInvalid", err)
	}
}

func TestExternalize(t *testing.T) {
	t.Parallel()
	e := testEvent()
	small, m, err := Externalize(e)
	if err != nil || m != nil || len(small.Entries) != 2 {
		t.Fatalf("small event externalized: %v, manifest %d bytes", err, len(m))
	}
	e.Entries = nil
	for i := 0; i < 5000; i++ {
		e.Entries = append(e.Entries, Entry{Path: fmt.Sprintf("data/aws/ec2/vpc/abc/state/%d/raw", i), SHA256: DigestOf([]byte{byte(i)}), Size: int64(i), Mode: 0o600})
	}
	big, m, err := Externalize(e)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil || len(big.Entries) != 0 || big.Manifest != DigestOf(m) {
		t.Fatalf("large event not externalized: entries %d manifest %v", len(big.Entries), big.Manifest)
	}
	b, err := EncodeEvent(big)
	if err != nil || len(b) > MaxInlineSize {
		t.Fatalf("externalized event: %d bytes, %v", len(b), err)
	}
	es, err := DecodeManifest(m, e.Partition)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e.Entries, es); diff != "" {
		t.Fatalf("manifest round trip (-want +got):\n%s", diff)
	}
	if _, err := DecodeManifest(m, "other"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("manifest for another partition accepted: %v", err)
	}
	if _, err := DecodeManifest(bytes.Replace(m, []byte(`"v":1`), []byte(`"v":9`), 1), e.Partition); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("manifest of unknown version: %v", err)
	}
}

func TestUUIDs(t *testing.T) {
	t.Parallel()
	a, err := NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewCommitID(rand.Reader)
	if ValidateUUID(a) != nil || a[14] != '7' || a >= b {
		t.Fatalf("v7 ids %q, %q: invalid or not time-ordered", a, b)
	}
	ms, err := strconv.ParseInt(strings.ReplaceAll(a[:13], "-", ""), 16, 64)
	if d := time.Since(time.UnixMilli(ms)); err != nil || d < 0 || d > time.Minute {
		t.Fatalf("v7 id %q: time %v (%v ago), want now", a, time.UnixMilli(ms), d)
	}
	c, err := NewLineageID(rand.Reader)
	if err != nil || ValidateUUID(c) != nil || c[14] != '4' {
		t.Fatalf("v4 id %q, %v", c, err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	good, _ := EncodeEvent(testEvent())
	f.Add(good)
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"entries":[{"path":"../x"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvent(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownVersion) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		// Whatever decodes is valid, re-encodes, and decodes to the same event.
		for _, en := range e.Entries {
			if ValidatePath(en.Path) != nil {
				t.Fatalf("decoded invalid path %q", en.Path)
			}
		}
		b2, err := EncodeEvent(e)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		e2, err := DecodeEvent(b2)
		if err != nil || !cmp.Equal(e, e2) {
			t.Fatalf("re-encoded event differs: %v", err)
		}
	})
}

package ledger

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// randomText returns a string drawn from characters chosen to exercise the
// encoder's escapes: HTML-escaped <, >, &, quotes, U+2028, multi-byte runes,
// and (when ctl) control characters and backslashes.
func randomText(r *rand.Rand, n int, ctl bool) string {
	alphabet := []rune("abcXYZ019-_.~ <>&'é€😀\u2028\u2029")
	if ctl {
		alphabet = append(alphabet, '"', '\\', '\n', '\t', '\x00', '\x1f', '\x7f')
	}
	var sb strings.Builder
	for range n {
		sb.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return sb.String()
}

// randomEvent returns a valid event whose strings need every kind of escape
// json.Marshal writes, with inline entries or a manifest.
func randomEvent(r *rand.Rand) Event {
	seg := func() string {
		for {
			s := randomText(r, 1+r.IntN(12), false)
			if s != "." && s != ".." && !strings.Contains(s, "/") {
				return s
			}
		}
	}
	var dir string
	switch r.IntN(4) {
	case 0:
		dir = "data/" + seg() + "/" + seg()
	case 1:
		dir = "workflow-runs/" + seg()
	case 2:
		dir = seg()
	default:
		dir = "outputs/" + seg() + "/" + seg() + "/" + seg()
	}
	e := Event{
		V: FormatVersion, Ledger: testLedger, Commit: testCommit, Host: randomText(r, 1+r.IntN(20), true),
		At:        time.Date(2026, 1+time.Month(r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.UTC),
		ModelSeq:  1 + r.Uint64N(1<<40),
		Parts:     1 + r.IntN(MaxBatch),
		Manifest:  Digest{},
		Partition: PartitionKey(dir + "/x"),
	}
	if r.IntN(2) == 0 {
		e.Message = randomText(r, r.IntN(40), true)
	}
	if e.ModelSeq > 1 {
		e.Prev = Seq(1 + r.Uint64N(1<<50))
	}
	e.Part = 1 + r.IntN(e.Parts)
	if r.IntN(8) == 0 {
		e.Manifest = DigestOf([]byte(e.Host))
		return e
	}
	seen := map[string]bool{}
	for range 1 + r.IntN(6) {
		p := dir + "/" + seg()
		if seen[p] || PartitionKey(p) != e.Partition {
			continue
		}
		seen[p] = true
		en := Entry{Path: p, Deleted: r.IntN(4) == 0}
		if !en.Deleted {
			en.SHA256, en.Size, en.Mode = DigestOf([]byte(p)), r.Int64N(1<<40), uint32(r.IntN(0o1000))
		}
		e.Entries = append(e.Entries, en)
	}
	if len(e.Entries) == 0 {
		e.Manifest = DigestOf([]byte(e.Host))
	}
	return e
}

// TestFastDecodeTakesWhatEncodeWrites: every event EncodeEvent writes is read
// by the fast path, to exactly what the strict decoder returns and what was
// encoded — so a replay never pays for encoding/json on its own events.
func TestFastDecodeTakesWhatEncodeWrites(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	escaped := 0
	var dec Decoder // shared by all cases, as a replay shares one
	for i := range 20000 {
		e := randomEvent(r)
		if err := ValidateEvent(e); err != nil {
			t.Fatalf("case %d: generator made an invalid event: %v", i, err)
		}
		b, err := EncodeEvent(e)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if bytes.IndexByte(b, '\\') >= 0 {
			escaped++
		}
		fast, ok := decodeEventFast(b)
		if !ok {
			t.Fatalf("case %d: fast path refused an event EncodeEvent wrote:\n%s", i, b)
		}
		strict, err := decodeEventStrict(b)
		if err != nil {
			t.Fatalf("case %d: strict decoder: %v", i, err)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("case %d: fast %+v\nstrict %+v", i, fast, strict)
		}
		if shared, err := dec.Decode(b); err != nil || !reflect.DeepEqual(shared, strict) {
			t.Fatalf("case %d: Decoder.Decode: %v\n%+v\nstrict %+v", i, err, shared, strict)
		}
		if e.Entries == nil {
			e.Entries = []Entry{}
		}
		if !reflect.DeepEqual(fast, e) {
			t.Fatalf("case %d: decoded %+v\nencoded %+v", i, fast, e)
		}
	}
	if escaped < 5000 {
		t.Fatalf("only %d of 20000 encodings held an escape: the generator does not exercise them", escaped)
	}
}

// TestEncodedBound: Externalize's bound holds for events whose every string
// needs escapes, and for the longest numbers.
func TestEncodedBound(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		e := randomEvent(r)
		if i%2 == 0 {
			e.ModelSeq, e.Prev = 1<<64-1, 1<<64-1
			for j := range e.Entries {
				e.Entries[j].Size = 1<<63 - 1
			}
		}
		b, err := EncodeEvent(e)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if bound := encodedBound(e); len(b) > bound {
			t.Fatalf("case %d: %d bytes encoded, bound %d:\n%s", i, len(b), bound, b)
		}
	}
}

// TestFastDecodeDefersEveryRejection: for each input the strict decoder
// rejects, the fast path declines (so the error is the strict one); for inputs
// outside the fast form that the strict decoder accepts, it declines too and
// DecodeEvent still returns the event.
func TestFastDecodeDefersEveryRejection(t *testing.T) {
	t.Parallel()
	good, err := EncodeEvent(testEvent())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("test setup: %q not in %s", old, good)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	rejected := map[string][]byte{
		"version 2":          edit(`"v":1`, `"v":2`),
		"unknown field":      edit(`"v":1`, `"v":1,"x":1`),
		"negative size":      edit(`"size":1`, `"size":-1`),
		"mode bits":          edit(`"mode":420`, `"mode":4096`),
		"mode overflow":      edit(`"mode":420`, `"mode":4294967296`),
		"traversal":          edit(`state/1/raw`, `../../../etc`),
		"modelSeq 0":         edit(`"modelSeq":7`, `"modelSeq":0`),
		"part beyond parts":  edit(`"part":1`, `"part":4`),
		"trailing data":      append(bytes.Clone(good), 'x'),
		"bad digest":         edit(`"sha256":"`, `"sha256":"X`),
		"leading zero":       edit(`"prev":1234`, `"prev":01234`),
		"fraction":           edit(`"prev":1234`, `"prev":1234.0`),
		"surrogate in host":  edit(`"host":"writer"`, `"host":"\ud800"`),
		"deleted with hash":  edit(`"deleted":true`, `"sha256":"`+DigestOf(nil).String()+`","deleted":true`),
		"duplicate path":     edit(`state/1/old`, `state/1/raw`),
		"wrong partition":    edit(`"partition":"data--aws--ec2--vpc--abc"`, `"partition":"data--aws--ec2--vpc--abd"`),
		"bad time":           edit(`"at":"2026-11-29T10:00:00.123456789Z"`, `"at":"2026-13-29T10:00:00Z"`),
		"empty message":      edit(`"message":"run vpc"`, `"message":""`),
		"control in message": edit(`"message":"run vpc"`, "\"message\":\"run\x01vpc\""),
	}
	for name, b := range rejected {
		_, ok := decodeEventFast(b)
		_, strictErr := decodeEventStrict(b)
		if ok && strictErr != nil {
			t.Errorf("%s: fast path accepted what the strict decoder rejects (%v)", name, strictErr)
		}
		if ok {
			t.Errorf("%s: fast path accepted %s", name, b)
		}
	}
	// Valid JSON of the same event in forms EncodeEvent never writes.
	accepted := map[string][]byte{
		"whitespace":       bytes.ReplaceAll(good, []byte(`,"`), []byte(`, "`)),
		"upper-case key":   edit(`"host":`, `"HOST":`),
		"null message":     edit(`"message":"run vpc"`, `"message":null`),
		"deleted false":    edit(`"mode":420}`, `"mode":420,"deleted":false}`),
		"trailing newline": append(bytes.Clone(good), '\n'),
		"escaped slash":    edit(`state/1/raw`, `state\/1\/raw`),
	}
	accepted["key order"] = append([]byte(`{"ledger":"`+testLedger+`",`), bytes.Replace(good[1:], []byte(`"ledger":"`+testLedger+`",`), nil, 1)...)
	want := testEvent()
	for name, b := range accepted {
		got, err := DecodeEvent(b)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, b)
			continue
		}
		if name == "null message" {
			want.Message = ""
		} else {
			want.Message = testEvent().Message
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v", name, got)
		}
		if fast, ok := decodeEventFast(b); ok && !reflect.DeepEqual(fast, got) {
			t.Errorf("%s: fast path decoded %+v", name, fast)
		}
	}
}

// FuzzFastDecodeAgrees is the fast path's contract: whatever it accepts, the
// strict decoder accepts too and decodes to the identical event.
func FuzzFastDecodeAgrees(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		b, err := EncodeEvent(randomEvent(r))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var dec Decoder // shared across inputs: its strings never leak from one into another
	f.Fuzz(func(t *testing.T, b []byte) {
		e1, err1 := DecodeEvent(b)
		e2, err2 := dec.Decode(b)
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(e1, e2) {
			t.Fatalf("DecodeEvent: %v, %+v\nDecoder.Decode: %v, %+v", err1, e1, err2, e2)
		}
		fast, ok := decodeEventFast(b)
		if !ok {
			return
		}
		strict, err := decodeEventStrict(b)
		if err != nil {
			t.Fatalf("fast path accepted what the strict decoder rejects: %v\n%q", err, b)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("fast %+v\nstrict %+v\ninput %q", fast, strict, b)
		}
	})
}

// The Decoder's string table is bounded: past maxInterned strings it shares
// what it has and allocates the rest, decoding the same either way.
func TestDecoderBounded(t *testing.T) {
	t.Parallel()
	var dec Decoder
	e := testEvent()
	e.Entries = e.Entries[:1]
	for i := range maxInterned + 100 {
		e.Host = fmt.Sprintf("host-%d", i)
		b, err := EncodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.Decode(b)
		if err != nil || got.Host != e.Host || got.Partition != e.Partition {
			t.Fatalf("event %d: %v, host %q", i, err, got.Host)
		}
	}
	if n := len(dec.strs.m); n != maxInterned {
		t.Fatalf("%d strings kept, bound %d", n, maxInterned)
	}
	long := strings.Repeat("h", maxInternLen+1)
	if s := dec.strs.get([]byte(long)); s != long || len(dec.strs.m) != maxInterned {
		t.Fatalf("a string over maxInternLen: %q kept?", s)
	}
}

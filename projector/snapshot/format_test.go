package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
	"github.com/syncledger/syncledger/projector"
)

const uuid = "0b5bd3ad-6a1c-4f4e-9a36-5e8a0e4c2f10"

func sample(n int) *Snapshot {
	s := &Snapshot{Ledger: uuid, Name: "test", Seq: ledger.Seq(10 * n), Marks: map[string]projector.Mark{}}
	for i := range n {
		p := fmt.Sprintf("data/t/m%03d/f", i%7)
		path := fmt.Sprintf("%s/file-%05d", p, i)
		s.Entries = append(s.Entries, Entry{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: int64(i), Mode: 0o644, Seq: ledger.Seq(i + 1)})
		key := ledger.PartitionKey(path)
		m := s.Marks[key]
		s.Marks[key] = projector.Mark{ModelSeq: m.ModelSeq + 1, Seq: ledger.Seq(i + 1)}
	}
	if n > 0 {
		s.Entries = append(s.Entries, Entry{Path: "audit/ünïcode & <html>.jsonl", SHA256: ledger.DigestOf(nil), Mode: 0o600, Seq: 1})
		s.Marks["audit"] = projector.Mark{ModelSeq: 1, Seq: 1}
	}
	sortEntries(s)
	return s
}

func sortEntries(s *Snapshot) {
	for i := 1; i < len(s.Entries); i++ {
		for j := i; j > 0 && s.Entries[j-1].Path > s.Entries[j].Path; j-- {
			s.Entries[j-1], s.Entries[j] = s.Entries[j], s.Entries[j-1]
		}
	}
}

func encode(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTripAndDeterminism(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 300} {
		s := sample(n)
		b := encode(t, s)
		if !bytes.Equal(b, encode(t, s)) {
			t.Fatalf("n=%d: two encodings differ", n)
		}
		got, err := Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if n == 0 {
			s.Entries = []Entry{}
		}
		if diff := cmp.Diff(s, got); diff != "" {
			t.Fatalf("n=%d: round trip (-want +got):\n%s", n, diff)
		}
	}
}

// Every truncation is detected, and every flipped bit either is or leaves the
// content intact (a bit the compressed format does not use for content).
func TestCorruptionDetected(t *testing.T) {
	t.Parallel()
	want := sample(40)
	b := encode(t, want)
	for n := range len(b) {
		if _, err := Decode(bytes.NewReader(b[:n])); err == nil {
			t.Fatalf("truncated to %d of %d bytes: decoded", n, len(b))
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		if got, err := Decode(bytes.NewReader(c)); err == nil && !cmp.Equal(got, want) {
			t.Fatalf("flipped bit in byte %d of %d: decoded to another snapshot", i, len(b))
		}
	}
}

// plain compresses lines as Encode would, with the trailer's hash computed, so a
// test can feed well-formed but wrong content.
func plain(t *testing.T, lines ...string) []byte {
	t.Helper()
	var body strings.Builder
	for _, l := range lines {
		body.WriteString(l + "\n")
	}
	sum := ledger.DigestOf([]byte(body.String()))
	body.WriteString(`{"end":"syncledger-snapshot","sha256":"` + sum.String() + "\"}\n")
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write([]byte(body.String()))
	zw.Close()
	return buf.Bytes()
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	hdr := func(extra string, entries, marks int, bytes int64) string {
		return fmt.Sprintf(`{"v":1,"kind":"syncledger-snapshot","ledger":"%s","name":"x","seq":5,"entries":%d,"marks":%d,"bytes":%d%s}`, uuid, entries, marks, bytes, extra)
	}
	d := ledger.DigestOf(nil).String()
	entry := `{"path":"audit/a","sha256":"` + d + `","size":3,"mode":420,"seq":2}`
	mark := `{"partition":"audit","modelSeq":1,"seq":2}`
	for _, tc := range []struct {
		name  string
		lines []string
		want  error
	}{
		{"ok", []string{hdr("", 1, 1, 3), entry, mark}, nil},
		{"newer version", []string{`{"v":2,"whatever":true}`}, ledger.ErrUnknownVersion},
		{"unknown header field", []string{hdr(`,"x":1`, 1, 1, 3), entry, mark}, ledger.ErrInvalid},
		{"unknown entry field", []string{hdr("", 1, 1, 3), strings.Replace(entry, `"seq"`, `"lazy":true,"seq"`, 1), mark}, ledger.ErrInvalid},
		{"count too high", []string{hdr("", 2, 1, 3), entry, mark}, ledger.ErrInvalid},
		{"count too low", []string{hdr("", 1, 0, 3), entry, mark}, ledger.ErrInvalid},
		{"bytes wrong", []string{hdr("", 1, 1, 4), entry, mark}, ledger.ErrInvalid},
		{"entry above its mark", []string{hdr("", 1, 1, 3), strings.Replace(entry, `"seq":2`, `"seq":3`, 1), mark}, ledger.ErrInvalid},
		{"mark above seq", []string{hdr("", 1, 1, 3), entry, strings.Replace(mark, `"seq":2`, `"seq":6`, 1)}, ledger.ErrInvalid},
		{"bad path", []string{hdr("", 1, 1, 3), strings.Replace(entry, "audit/a", "../a", 1), mark}, ledger.ErrInvalid},
		{"not a snapshot", []string{`{"v":1,"kind":"other"}`}, ledger.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(plain(t, tc.lines...)))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Decode: %v, want %v", err, tc.want)
			}
		})
	}
	// A wrong trailer hash is a checksum error.
	b := plain(t, hdr("", 1, 1, 3), entry, mark)
	zr, _ := zstd.NewReader(nil)
	defer zr.Close()
	raw, err := zr.DecodeAll(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"size":3`), []byte(`"size":5`), 1)
	raw = bytes.Replace(raw, []byte(`"bytes":3`), []byte(`"bytes":5`), 1)
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	if _, err := Decode(&buf); !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("altered content under a valid frame: %v, want ErrChecksum", err)
	}
}

// newAttestLog is a ledger of uuid on the in-memory log: the store's tests
// read no event, only its attestations.
func newAttestLog(t *testing.T) *memledger.Log {
	t.Helper()
	l, err := memledger.New(ledger.Info{Name: "l", UUID: uuid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestStoreListSelect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objsDrv, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	objs := ledger.NewBucket(objsDrv, ledger.RetryPolicy{Attempts: 1})
	lg := newAttestLog(t)
	var infos []Info
	for _, n := range []int{3, 9, 12} {
		info, err := Put(ctx, lg, objs, sample(n))
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	// A foreign object and another ledger's snapshot are not listed.
	objs.PutObject(ctx, Prefix+uuid+"/notes.txt", strings.NewReader("x"), 1)
	other := sample(2)
	other.Ledger = "1b5bd3ad-6a1c-4f4e-9a36-5e8a0e4c2f10"
	if _, err := Put(ctx, lg, objs, other); err != nil {
		t.Fatal(err)
	}
	got, err := ListAttested(ctx, lg, objs, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Seq != 120 || got[2].Seq != 30 || !got[0].Attested || got[0].SHA256 != infos[2].SHA256 {
		t.Fatalf("List: %+v", got)
	}
	// The newest is corrupt: Select skips it and reports it.
	objs.PutObject(ctx, got[0].Key, strings.NewReader("garbage"), 7)
	var skipped []string
	s, info, err := Select(ctx, lg, objs, uuid, nil, func(i Info, err error) { skipped = append(skipped, i.Key) })
	if err != nil || s.Seq != 90 || info.Seq != 90 || len(skipped) != 1 {
		t.Fatalf("Select: %v seq %d, skipped %v", err, info.Seq, skipped)
	}
	// A usable filter, and nothing usable.
	if s, _, err := Select(ctx, lg, objs, uuid, func(i Info) bool { return i.Seq < 50 }, nil); err != nil || s.Seq != 30 {
		t.Fatalf("Select below 50: %v", err)
	}
	if _, _, err := Select(ctx, lg, objs, uuid, func(Info) bool { return false }, nil); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Select none: %v", err)
	}
	// A snapshot stored under another seq's key is refused, even attested.
	b := encode(t, sample(3))
	objs.PutObject(ctx, Key(uuid, 31), bytes.NewReader(b), int64(len(b)))
	if _, err := Get(ctx, objs, Info{Key: Key(uuid, 31), Ledger: uuid, Seq: 31, Attested: true, SHA256: ledger.DigestOf(b)}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Get of a misplaced snapshot: %v", err)
	}
}

// TestForgedSnapshotNeverUsed: whoever may write the object store (a host
// credential) stores a well-formed snapshot, with a correct checksum, at a seq
// the log attests nothing at, or in place of an attested one. Neither is read:
// Select takes the newest attested snapshot whose bytes hash to what the log
// attests.
func TestForgedSnapshotNeverUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objsDrv, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	objs := ledger.NewBucket(objsDrv, ledger.RetryPolicy{Attempts: 1})
	lg := newAttestLog(t)
	if _, err := Put(ctx, lg, objs, sample(3)); err != nil {
		t.Fatal(err)
	}
	// A newer snapshot nobody attested, holding fewer files.
	forged := sample(9)
	forged.Entries = forged.Entries[:1]
	b := encode(t, forged)
	objs.PutObject(ctx, Key(uuid, forged.Seq), bytes.NewReader(b), int64(len(b)))
	var skipped []error
	s, _, err := Select(ctx, lg, objs, uuid, nil, func(_ Info, err error) { skipped = append(skipped, err) })
	if err != nil || s.Seq != 30 || len(skipped) != 1 || !errors.Is(skipped[0], ErrNotAttested) {
		t.Fatalf("Select over a forged newest: %v, seq %v, skipped %v", err, s, skipped)
	}
	// The attested one replaced by other well-formed bytes of the same seq.
	forged = sample(3)
	forged.Entries = forged.Entries[1:]
	b = encode(t, forged)
	objs.PutObject(ctx, Key(uuid, 30), bytes.NewReader(b), int64(len(b)))
	if _, _, err := Select(ctx, lg, objs, uuid, nil, nil); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Select over a replaced snapshot: %v, want none usable", err)
	}
	infos, _ := ListAttested(ctx, lg, objs, uuid)
	for _, i := range infos {
		if _, err := Get(ctx, objs, i); !errors.Is(err, ErrNotAttested) {
			t.Errorf("Get %s: %v, want ErrNotAttested", i.Key, err)
		}
	}
}

// TestAdopt: snapshots a release before attestations stored (and its
// retention bound) are attested by Adopt, except one that does not read back;
// Select then uses them. The ledger is what such a release leaves: a log it
// truncated below 25 without attesting anything, its snapshots and its bound
// beside the blobs.
func TestAdopt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	h.commits(90)
	for _, n := range []ledger.Seq{30, 90} {
		h.store(h.build(n))
	}
	objs, lg, uuid := h.objs, h.lg, h.uuid
	objs.PutObject(ctx, Key(uuid, 60), strings.NewReader("garbage"), 7)
	if _, err := lg.TruncateBefore(ctx, 25); err != nil {
		t.Fatal(err)
	}
	h.retentionJSON(25)
	if _, _, err := Select(ctx, lg, objs, uuid, nil, nil); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Select before adopting: %v, want none usable", err)
	}
	res, err := Adopt(ctx, Config{Log: lg, Blobs: objs, Objects: objs}, AdoptOptions{})
	if err != nil || len(res.Adopted) != 2 || len(res.Skipped) != 1 || res.Retained != 25 || !res.Legacy {
		t.Fatalf("Adopt = %+v, %v", res, err)
	}
	if res.Adopted[0].Verified || !res.Adopted[1].Verified {
		t.Errorf("Adopt: 30 (its events gone) verified %v, 90 (replayed from 30) verified %v; want false, true", res.Adopted[0].Verified, res.Adopted[1].Verified)
	}
	if s, _, err := Select(ctx, lg, objs, uuid, nil, nil); err != nil || s.Seq != 90 {
		t.Fatalf("Select after adopting: %v %v", s, err)
	}
	if a, err := lg.Attested(ctx); err != nil || a.Retained != 25 {
		t.Errorf("retention bound attested %d, %v; want 25", a.Retained, err)
	}
}

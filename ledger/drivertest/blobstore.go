package drivertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// TestBlobStore runs the conformance suite of content-addressed blobs: a
// ledger.Bucket over the driver newStore returns (a new, empty one per
// subtest), retrying nothing. Corruption is injected by writing bytes straight
// to ledger.BlobKey(d) as a keyed object.
func TestBlobStore(t *testing.T, newStore func(t *testing.T) driver.Bucket) {
	t.Helper()
	testBlobStore(t, newStore, once)
}

func testBlobStore(t *testing.T, newStore func(t *testing.T) driver.Bucket, p ledger.RetryPolicy) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket)
	}{
		{"PutGet", testBlobPutGet},
		{"KeyLayout", testBlobKeyLayout},
		{"NotFound", testBlobNotFound},
		{"PutIdempotent", testBlobPutIdempotent},
		{"PutRefreshesOld", testBlobPutRefreshesOld},
		{"PutMismatch", testBlobPutMismatch},
		{"PutFailingReader", testBlobPutFailingReader},
		{"Empty", testBlobEmpty},
		{"LargeUnknownSize", testBlobLargeUnknownSize},
		{"FlippedByte", testBlobFlippedByte},
		{"Truncated", testBlobTruncated},
		{"Extended", testBlobExtended},
		{"PutRepairsWrongSize", testBlobPutRepairsWrongSize},
		{"PutOverSquattedKey", testBlobPutOverSquattedKey},
		{"Batch", testBlobBatch},
		{"BatchOverSquattedKey", testBlobBatchOverSquattedKey},
		{"BatchMismatch", testBlobBatchMismatch},
		{"List", testBlobList},
		{"Delete", testBlobDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &counter{Bucket: newStore(t)}
			tc.fn(t, testContext(t), c, open(t, c, p))
		})
	}
	t.Run("CutBody", func(t *testing.T) { testBlobCutBody(t, testContext(t), newStore) })
	t.Run("BatchRetried", func(t *testing.T) { testBlobBatchRetried(t, testContext(t), newStore) })
}

func putBlob(t *testing.T, ctx context.Context, bs *ledger.Bucket, b []byte) ledger.Digest {
	t.Helper()
	d, err := ledger.PutBytes(ctx, bs, b)
	if err != nil {
		t.Fatalf("PutBytes(%d bytes) = %v", len(b), err)
	}
	return d
}

func readBlob(t *testing.T, ctx context.Context, bs *ledger.Bucket, d ledger.Digest) []byte {
	t.Helper()
	b, err := ledger.ReadBlob(ctx, bs, d)
	if err != nil {
		t.Fatalf("ReadBlob(%s) = %v", d, err)
	}
	return b
}

// wantBlobAbsent fails unless no blob and no object is stored under d.
func wantBlobAbsent(t *testing.T, ctx context.Context, bs *ledger.Bucket, d ledger.Digest) {
	t.Helper()
	if _, err := bs.Stat(ctx, d); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Stat(%s) = %v, want ErrNotFound", d, err)
	}
	if _, err := bs.StatObject(ctx, ledger.BlobKey(d)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("StatObject(BlobKey(%s)) = %v, want ErrNotFound", d, err)
	}
}

// wantCorrupt fails unless reading blob d to EOF fails with ErrChecksum, both with a
// plain io.ReadAll and through ReadBlob.
func wantCorrupt(t *testing.T, ctx context.Context, bs *ledger.Bucket, d ledger.Digest) {
	t.Helper()
	rc, err := bs.Get(ctx, d)
	if err != nil {
		t.Fatalf("Get(%s) = %v (a corrupt blob is still opened; reading it fails)", d, err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, ledger.ErrChecksum) {
		t.Errorf("reading corrupt blob to EOF = %d bytes, %v, want ErrChecksum", len(b), err)
	}
	if _, err := ledger.ReadBlob(ctx, bs, d); !errors.Is(err, ledger.ErrChecksum) {
		t.Errorf("ReadBlob(corrupt) = %v, want ErrChecksum", err)
	}
}

func testBlobPutGet(t *testing.T, ctx context.Context, _ *counter, bs *ledger.Bucket) {
	data := randomBytes(20, 70_000)
	d := putBlob(t, ctx, bs, data)
	if d != ledger.DigestOf(data) {
		t.Fatalf("PutBytes digest = %s, want %s", d, ledger.DigestOf(data))
	}
	wantContent(t, "ReadBlob", readBlob(t, ctx, bs, d), data)
	info, err := bs.Stat(ctx, d)
	if err != nil || info.Size != int64(len(data)) {
		t.Errorf("Stat = size %d, %v, want %d, nil", info.Size, err, len(data))
	}
}

func testBlobKeyLayout(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := []byte("hello, blob")
	d := putBlob(t, ctx, bs, data)
	hex := d.String()
	want := "blobs/sha256/" + hex[:2] + "/" + hex
	if got := ledger.BlobKey(d); got != want {
		t.Errorf("BlobKey = %q, want %q", got, want)
	}
	if got := keys(list(t, ctx, bs, "")); !slices.Equal(got, []string{want}) {
		t.Errorf("objects after one Put = %q, want [%q]", got, want)
	}
	wantContent(t, "object at BlobKey", get(t, ctx, bs, want), data)
}

func testBlobNotFound(t *testing.T, ctx context.Context, _ *counter, bs *ledger.Bucket) {
	d := ledger.DigestOf([]byte("never stored"))
	if rc, err := bs.Get(ctx, d); !errors.Is(err, ledger.ErrNotFound) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Get(absent) = %v, want ErrNotFound", err)
	}
	if _, err := bs.Stat(ctx, d); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Stat(absent) = %v, want ErrNotFound", err)
	}
}

func testBlobPutIdempotent(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := randomBytes(21, 10_000)
	d := putBlob(t, ctx, bs, data)
	if n := c.puts.Load(); n != 1 {
		t.Fatalf("first Put made %d PutObject calls, want 1", n)
	}
	putBlob(t, ctx, bs, data)
	if err := bs.Put(ctx, d, onlyReader{bytes.NewReader(data)}, -1); err != nil {
		t.Fatalf("Put(size -1) of a present blob = %v", err)
	}
	if n := c.puts.Load(); n != 1 {
		t.Errorf("three Puts of one blob made %d PutObject calls, want 1", n)
	}
	wantContent(t, "ReadBlob", readBlob(t, ctx, bs, d), data)
}

// A blob stored longer ago than ledger.BlobRefreshAge is stored again, so that
// its time is recent for blob GC; the stored object's time moves forward.
func testBlobPutRefreshesOld(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := randomBytes(22, 5_000)
	d := putBlob(t, ctx, bs, data)
	c.age.Store(int64(ledger.BlobRefreshAge - time.Minute))
	putBlob(t, ctx, bs, data)
	if n := c.puts.Load(); n != 1 {
		t.Fatalf("Put of a blob stored %v ago made %d PutObject calls in all, want 1 (taken as is)", ledger.BlobRefreshAge-time.Minute, n)
	}
	c.age.Store(int64(ledger.BlobRefreshAge + time.Minute))
	before, err := bs.StatObject(ctx, ledger.BlobKey(d))
	if err != nil {
		t.Fatal(err)
	}
	putBlob(t, ctx, bs, data)
	if n := c.puts.Load(); n != 2 {
		t.Fatalf("Put of a blob stored %v ago made %d PutObject calls in all, want 2 (stored again)", ledger.BlobRefreshAge+time.Minute, n)
	}
	c.age.Store(0)
	after, err := bs.StatObject(ctx, ledger.BlobKey(d))
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(after.ModTime) > ledger.BlobRefreshAge/2 || !after.ModTime.After(before.ModTime) {
		t.Fatalf("blob's time after the refresh: %v (reported before: %v)", after.ModTime, before.ModTime)
	}
	wantContent(t, "ReadBlob", readBlob(t, ctx, bs, d), data)
}

func testBlobPutMismatch(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	right := randomBytes(22, 5000)
	d := ledger.DigestOf(right)
	wrong := bytes.Clone(right)
	wrong[2500] ^= 1
	for _, tc := range []struct {
		name string
		r    io.Reader
		size int64
	}{
		{"same-size", bytes.NewReader(wrong), int64(len(wrong))},
		{"unknown-size", onlyReader{bytes.NewReader(wrong)}, -1},
		{"other-content", strings.NewReader("entirely different"), 18},
		{"prefix-only", bytes.NewReader(right[:4000]), 4000},
	} {
		if err := bs.Put(ctx, d, tc.r, tc.size); !errors.Is(err, ledger.ErrChecksum) {
			t.Errorf("%s: Put(content not hashing to d) = %v, want ErrChecksum", tc.name, err)
		}
		wantBlobAbsent(t, ctx, bs, d)
	}
	var got []ledger.Digest
	if err := bs.List(ctx, func(d ledger.Digest, _ ledger.ObjectInfo) error {
		got = append(got, d)
		return nil
	}); err != nil || len(got) != 0 {
		t.Errorf("List after rejected Puts = %v, %v, want nothing", got, err)
	}
}

func testBlobPutFailingReader(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := randomBytes(23, 200_000)
	d := ledger.DigestOf(data)
	err := bs.Put(ctx, d, &failingReader{good: data[:100_000], err: errBoom}, int64(len(data)))
	if !errors.Is(err, errBoom) {
		t.Errorf("Put with a failing reader = %v, want the reader's error", err)
	}
	wantBlobAbsent(t, ctx, bs, d)
}

func testBlobEmpty(t *testing.T, ctx context.Context, _ *counter, bs *ledger.Bucket) {
	d := putBlob(t, ctx, bs, nil)
	if got := readBlob(t, ctx, bs, d); len(got) != 0 {
		t.Errorf("ReadBlob(empty) = %d bytes", len(got))
	}
	if info, err := bs.Stat(ctx, d); err != nil || info.Size != 0 {
		t.Errorf("Stat(empty) = size %d, %v, want 0, nil", info.Size, err)
	}
}

func testBlobLargeUnknownSize(t *testing.T, ctx context.Context, _ *counter, bs *ledger.Bucket) {
	data := randomBytes(24, 2<<20+1)
	d := ledger.DigestOf(data)
	if err := bs.Put(ctx, d, onlyReader{bytes.NewReader(data)}, -1); err != nil {
		t.Fatalf("Put(%d bytes, size -1) = %v", len(data), err)
	}
	wantContent(t, "ReadBlob", readBlob(t, ctx, bs, d), data)
}

// testBlobFlippedByte: a stored blob whose bytes changed under it (bit rot, a bad
// disk, a tampering host) is reported as ErrChecksum by a read to EOF.
func testBlobFlippedByte(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	for _, data := range [][]byte{[]byte("hello"), randomBytes(25, 100_000)} {
		d := putBlob(t, ctx, bs, data)
		for _, at := range []int{0, len(data) / 2, len(data) - 1} {
			bad := bytes.Clone(data)
			bad[at] ^= 0x01
			put(t, ctx, bs, ledger.BlobKey(d), bad)
			wantCorrupt(t, ctx, bs, d)
		}
	}
}

func testBlobTruncated(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := randomBytes(26, 50_000)
	d := putBlob(t, ctx, bs, data)
	for _, n := range []int{len(data) - 1, len(data) / 2, 0} {
		put(t, ctx, bs, ledger.BlobKey(d), data[:n])
		wantCorrupt(t, ctx, bs, d)
	}
}

func testBlobExtended(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := randomBytes(27, 50_000)
	d := putBlob(t, ctx, bs, data)
	put(t, ctx, bs, ledger.BlobKey(d), append(bytes.Clone(data), 0))
	wantCorrupt(t, ctx, bs, d)
}

// testBlobPutRepairsWrongSize: Put of a blob whose stored object has another size
// than the one given uploads it again (a truncated upload is healed).
func testBlobPutRepairsWrongSize(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	data := randomBytes(28, 10_000)
	d := putBlob(t, ctx, bs, data)
	put(t, ctx, bs, ledger.BlobKey(d), data[:5000])
	putBlob(t, ctx, bs, data)
	wantContent(t, "ReadBlob after repair", readBlob(t, ctx, bs, d), data)
}

// testBlobPutOverSquattedKey: other bytes of the same size stored under a
// blob's key before its content (by whoever may put objects, knowing the
// digest of predictable content) do not make Put take the blob as stored:
// after Put, the blob reads as its content (issue 26).
func testBlobPutOverSquattedKey(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	for _, n := range []int{10, 300_000} {
		data := randomBytes(uint64(40+n), n)
		d := ledger.DigestOf(data)
		put(t, ctx, bs, ledger.BlobKey(d), bytes.Repeat([]byte{'z'}, n))
		putBlob(t, ctx, bs, data)
		wantContent(t, "ReadBlob after a put over a squatted key", readBlob(t, ctx, bs, d), data)
	}
}

func testBlobList(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	var want []ledger.Digest
	size := map[ledger.Digest]int64{}
	for i := range 5 {
		data := randomBytes(uint64(30+i), 100*(i+1))
		d := putBlob(t, ctx, bs, data)
		want = append(want, d)
		size[d] = int64(len(data))
	}
	slices.SortFunc(want, func(a, b ledger.Digest) int { return bytes.Compare(a[:], b[:]) })
	// Objects that are not blobs, inside and outside the blob prefix.
	foreign := ledger.DigestOf([]byte("foreign"))
	wrongFan := "00"
	if foreign.String()[:2] == wrongFan {
		wrongFan = "ff"
	}
	for _, key := range []string{
		"snapshots/0001",
		ledger.BlobPrefix + "zz/not-a-digest",
		ledger.BlobPrefix + wrongFan + "/" + foreign.String(), // wrong fan-out directory
		ledger.BlobPrefix + "README",
	} {
		put(t, ctx, bs, key, []byte("not a blob"))
	}
	var got []ledger.Digest
	err := bs.List(ctx, func(d ledger.Digest, info ledger.ObjectInfo) error {
		got = append(got, d)
		if info.Size != size[d] {
			t.Errorf("List: %s has size %d, want %d", d, info.Size, size[d])
		}
		if info.Key != ledger.BlobKey(d) {
			t.Errorf("List: %s has key %q, want %q", d, info.Key, ledger.BlobKey(d))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v (in digest order)", got, want)
	}
	errStop := errors.New("stop")
	if err := bs.List(ctx, func(ledger.Digest, ledger.ObjectInfo) error { return errStop }); !errors.Is(err, errStop) {
		t.Errorf("List with fn failing = %v, want fn's error", err)
	}
}

func testBlobDelete(t *testing.T, ctx context.Context, c *counter, bs *ledger.Bucket) {
	d := putBlob(t, ctx, bs, []byte("short-lived"))
	kept := putBlob(t, ctx, bs, []byte("kept"))
	if err := bs.Delete(ctx, d); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	wantBlobAbsent(t, ctx, bs, d)
	if err := bs.Delete(ctx, d); err != nil {
		t.Errorf("Delete(absent) = %v, want nil", err)
	}
	wantContent(t, "ReadBlob(kept)", readBlob(t, ctx, bs, kept), []byte("kept"))
}

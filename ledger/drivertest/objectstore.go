package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// TestObjectStore runs the conformance suite of keyed objects: a
// ledger.Bucket over the driver newStore returns, retrying nothing (so that
// no answer of the driver is hidden). newStore must return the driver of a
// new, empty bucket on each call; it is called once per subtest, with the
// subtest's t (so it can register cleanups).
func TestObjectStore(t *testing.T, newStore func(t *testing.T) driver.Bucket) {
	t.Helper()
	testObjectStore(t, newStore, once)
}

func testObjectStore(t *testing.T, newStore func(t *testing.T) driver.Bucket, p ledger.RetryPolicy) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, s *ledger.Bucket)
	}{
		{"PutGetStat", testPutGetStat},
		{"NotFound", testNotFound},
		{"DeleteMissing", testDeleteMissing},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"ZeroLength", testZeroLength},
		{"Large", testLarge},
		{"UnknownSize", testUnknownSize},
		{"ReadsToEOF", testReadsToEOF},
		{"SizeMismatch", testSizeMismatch},
		{"FailingReader", testFailingReader},
		{"FailingReaderKeepsPrevious", testFailingReaderKeepsPrevious},
		{"KeyCharacters", testKeyCharacters},
		{"InvalidKeys", testInvalidKeys},
		{"List", testList},
		{"ListEmpty", testListEmpty},
		{"ListStopsOnError", testListStopsOnError},
		{"CancelledContext", testCancelledContext},
		{"CancelDuringPut", testCancelDuringPut},
		{"Batch", testBatch},
		{"BatchStat", testBatchStat},
		{"BatchFailedPut", testBatchFailedPut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, testContext(t), open(t, newStore(t), p))
		})
	}
	t.Run("CutBody", func(t *testing.T) { testCutBody(t, testContext(t), newStore) })
}

func testPutGetStat(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	const key = "dir/sub/object.bin"
	data := randomBytes(1, 1000)
	put(t, ctx, s, key, data)
	wantContent(t, "GetObject", get(t, ctx, s, key), data)
	info, err := s.StatObject(ctx, key)
	if err != nil {
		t.Fatalf("StatObject(%q) = %v", key, err)
	}
	if info.Key != key || info.Size != int64(len(data)) {
		t.Errorf("StatObject(%q) = key %q size %d, want key %q size %d", key, info.Key, info.Size, key, len(data))
	}
	wantModTime(t, "StatObject", info.ModTime)
}

func testNotFound(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	put(t, ctx, s, "present/object", []byte("x"))
	for _, key := range []string{"missing", "present/missing", "present/object/below", "present"} {
		rc, err := s.GetObject(ctx, key)
		if !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("GetObject(%q) = %v, want ErrNotFound", key, err)
		}
		if rc != nil {
			t.Errorf("GetObject(%q) returned a reader with its error", key)
			rc.Close()
		}
		if _, err := s.StatObject(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("StatObject(%q) = %v, want ErrNotFound", key, err)
		}
	}
}

func testDeleteMissing(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	if err := s.DeleteObject(ctx, "never/stored"); err != nil {
		t.Errorf("DeleteObject(absent) = %v, want nil", err)
	}
	put(t, ctx, s, "dir/object", []byte("x"))
	if err := s.DeleteObject(ctx, "dir"); err != nil {
		t.Errorf("DeleteObject(%q) (a prefix of a key, not a key) = %v, want nil", "dir", err)
	}
	wantContent(t, "GetObject after deleting its prefix", get(t, ctx, s, "dir/object"), []byte("x"))
}

func testDelete(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	put(t, ctx, s, "a/doomed", []byte("bye"))
	put(t, ctx, s, "a/kept", []byte("stay"))
	if err := s.DeleteObject(ctx, "a/doomed"); err != nil {
		t.Fatalf("DeleteObject = %v", err)
	}
	wantAbsent(t, ctx, s, "a/doomed")
	if got, want := keys(list(t, ctx, s, "")), []string{"a/kept"}; !slices.Equal(got, want) {
		t.Errorf("ListObjects after delete = %q, want %q", got, want)
	}
	if err := s.DeleteObject(ctx, "a/doomed"); err != nil {
		t.Errorf("second DeleteObject = %v, want nil", err)
	}
	put(t, ctx, s, "a/doomed", []byte("back"))
	wantContent(t, "GetObject after re-put", get(t, ctx, s, "a/doomed"), []byte("back"))
}

func testOverwrite(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	const key = "over/write"
	put(t, ctx, s, key, randomBytes(2, 300))
	put(t, ctx, s, key, []byte("short"))
	wantContent(t, "GetObject after overwrite", get(t, ctx, s, key), []byte("short"))
	info, err := s.StatObject(ctx, key)
	if err != nil || info.Size != 5 {
		t.Errorf("StatObject after overwrite = size %d, %v, want 5, nil", info.Size, err)
	}
	infos := list(t, ctx, s, "")
	if len(infos) != 1 || infos[0].Key != key || infos[0].Size != 5 {
		t.Errorf("ListObjects after overwrite = %+v, want one %q of 5 bytes", infos, key)
	}
}

func testZeroLength(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, tc := range []struct {
		key  string
		size int64
	}{{"empty/known", 0}, {"empty/unknown", -1}} {
		if err := s.PutObject(ctx, tc.key, onlyReader{bytes.NewReader(nil)}, tc.size); err != nil {
			t.Fatalf("PutObject(%q, empty, size %d) = %v", tc.key, tc.size, err)
		}
		if got := get(t, ctx, s, tc.key); len(got) != 0 {
			t.Errorf("GetObject(%q) = %d bytes, want 0", tc.key, len(got))
		}
		if info, err := s.StatObject(ctx, tc.key); err != nil || info.Size != 0 {
			t.Errorf("StatObject(%q) = size %d, %v, want 0, nil", tc.key, info.Size, err)
		}
	}
	infos := list(t, ctx, s, "empty/")
	if got, want := keys(infos), []string{"empty/known", "empty/unknown"}; !slices.Equal(got, want) {
		t.Fatalf("ListObjects(empty/) = %q, want %q", got, want)
	}
	for _, info := range infos {
		if info.Size != 0 {
			t.Errorf("ListObjects: %q has size %d, want 0", info.Key, info.Size)
		}
	}
}

func testLarge(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	const key = "large/object"
	data := randomBytes(3, 5<<20+123)
	put(t, ctx, s, key, data)
	wantContent(t, "GetObject", get(t, ctx, s, key), data)
	if info, err := s.StatObject(ctx, key); err != nil || info.Size != int64(len(data)) {
		t.Errorf("StatObject = size %d, %v, want %d, nil", info.Size, err, len(data))
	}
}

func testUnknownSize(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, tc := range []struct {
		key string
		n   int
	}{{"unknown/small", 10}, {"unknown/large", 3<<20 + 7}} {
		data := randomBytes(uint64(tc.n), tc.n)
		if err := s.PutObject(ctx, tc.key, onlyReader{bytes.NewReader(data)}, -1); err != nil {
			t.Fatalf("PutObject(%q, %d bytes, size -1) = %v", tc.key, tc.n, err)
		}
		wantContent(t, "GetObject("+tc.key+")", get(t, ctx, s, tc.key), data)
		if info, err := s.StatObject(ctx, tc.key); err != nil || info.Size != int64(tc.n) {
			t.Errorf("StatObject(%q) = size %d, %v, want %d, nil", tc.key, info.Size, err, tc.n)
		}
	}
}

// testReadsToEOF: PutObject reads its input to EOF even when it knows the size, the
// contract BlobStore's verification depends on.
func testReadsToEOF(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, size := range []int64{100, -1} {
		r := &eofReader{r: bytes.NewReader(randomBytes(4, 100))}
		if err := s.PutObject(ctx, "eof/object", r, size); err != nil {
			t.Fatalf("PutObject(size %d) = %v", size, err)
		}
		if !r.eof.Load() {
			t.Errorf("PutObject(size %d) returned before its reader reported io.EOF", size)
		}
	}
}

func testSizeMismatch(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, tc := range []struct {
		name string
		n    int
		size int64
	}{{"short", 5, 10}, {"long", 10, 5}} {
		key := "mismatch/" + tc.name
		err := s.PutObject(ctx, key, onlyReader{bytes.NewReader(randomBytes(5, tc.n))}, tc.size)
		if err == nil {
			t.Errorf("PutObject(%d bytes, size %d) = nil, want an error", tc.n, tc.size)
		}
		wantAbsent(t, ctx, s, key)
	}
}

func testFailingReader(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	good := randomBytes(6, 256<<10)
	for _, tc := range []struct {
		name string
		size int64
	}{{"known-size", 512 << 10}, {"unknown-size", -1}} {
		key := "failing/" + tc.name
		err := s.PutObject(ctx, key, &failingReader{good: good, err: errBoom}, tc.size)
		if !errors.Is(err, errBoom) {
			t.Errorf("PutObject with a failing reader = %v, want an error wrapping the reader's", err)
		}
		wantAbsent(t, ctx, s, key)
	}
	// Failing at once, before any byte.
	err := s.PutObject(ctx, "failing/at-once", &failingReader{err: errBoom}, -1)
	if !errors.Is(err, errBoom) {
		t.Errorf("PutObject with a reader failing at once = %v, want the reader's error", err)
	}
	wantAbsent(t, ctx, s, "failing/at-once")
}

func testFailingReaderKeepsPrevious(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	const key = "failing/over-existing"
	old := randomBytes(7, 1000)
	put(t, ctx, s, key, old)
	err := s.PutObject(ctx, key, &failingReader{good: randomBytes(8, 300<<10), err: errBoom}, -1)
	if !errors.Is(err, errBoom) {
		t.Errorf("PutObject with a failing reader = %v, want the reader's error", err)
	}
	wantContent(t, "GetObject after failed overwrite", get(t, ctx, s, key), old)
	if info, err := s.StatObject(ctx, key); err != nil || info.Size != int64(len(old)) {
		t.Errorf("StatObject after failed overwrite = size %d, %v, want %d, nil", info.Size, err, len(old))
	}
}

// testKeyCharacters: keys with characters that need escaping in URLs and subjects
// round-trip unchanged.
func testKeyCharacters(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	ks := []string{
		"chars/with space",
		"chars/plus+sign",
		"chars/percent%20x",
		"chars/unicode-é€日本",
		"chars/tilde~equals=colon:comma,",
		"chars/.hidden",
		"chars/...",
		"chars/amp&q?hash#",
		"chars/quote'star*",
		"chars/x" + strings.Repeat("y", 200),
	}
	for i, key := range ks {
		put(t, ctx, s, key, []byte{byte(i)})
	}
	for i, key := range ks {
		wantContent(t, "GetObject("+key+")", get(t, ctx, s, key), []byte{byte(i)})
		if info, err := s.StatObject(ctx, key); err != nil || info.Key != key {
			t.Errorf("StatObject(%q) = key %q, %v", key, info.Key, err)
		}
	}
	want := slices.Clone(ks)
	slices.Sort(want)
	if got := keys(list(t, ctx, s, "chars/")); !slices.Equal(got, want) {
		t.Errorf("ListObjects(chars/) = %q, want %q", got, want)
	}
}

func testInvalidKeys(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	bad := []string{
		"", "/abs", "trailing/", "double//slash", "..", "../up", "a/../b", "a/..",
		".", "./a", "a/./b", `back\slash`, "nul\x00", "newline\n", "\xff\xfe",
		strings.Repeat("k", 1025),
	}
	for _, key := range bad {
		if err := s.PutObject(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("PutObject(%q) = %v, want ErrInvalid", key, err)
		}
		if rc, err := s.GetObject(ctx, key); !errors.Is(err, ledger.ErrInvalid) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("GetObject(%q) = %v, want ErrInvalid", key, err)
		}
		if _, err := s.StatObject(ctx, key); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("StatObject(%q) = %v, want ErrInvalid", key, err)
		}
		if err := s.DeleteObject(ctx, key); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("DeleteObject(%q) = %v, want ErrInvalid", key, err)
		}
	}
	for _, prefix := range []string{"/abs", "a//", "../", "a/../", "./", `a\`, "nul\x00"} {
		err := s.ListObjects(ctx, prefix, func(ledger.ObjectInfo) error { return nil })
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ListObjects(%q) = %v, want ErrInvalid", prefix, err)
		}
	}
	if got := list(t, ctx, s, ""); len(got) != 0 {
		t.Errorf("ListObjects after rejected puts = %q, want nothing", keys(got))
	}
}

func testList(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	// Chosen so that lexical key order differs from a directory walk's order
	// ('-' and '.' sort before '/', '0' after it), and so that no key is also a
	// "directory" of another (a filesystem cannot hold both "a" and "a/b").
	all := []string{"a-b", "a.c", "a/b", "a/c/d", "a/c/e", "a/ca", "a0", "b/x/y", "ba"}
	for i, key := range slices.Backward(all) {
		put(t, ctx, s, key, bytes.Repeat([]byte{'x'}, i+1))
	}
	size := map[string]int64{}
	for i, key := range all {
		size[key] = int64(i + 1)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", []string{"a-b", "a.c", "a/b", "a/c/d", "a/c/e", "a/ca", "a0"}},
		{"a/", []string{"a/b", "a/c/d", "a/c/e", "a/ca"}},
		{"a/c", []string{"a/c/d", "a/c/e", "a/ca"}},
		{"a/c/", []string{"a/c/d", "a/c/e"}},
		{"a/c/d", []string{"a/c/d"}},
		{"b", []string{"b/x/y", "ba"}},
		{"b/x/", []string{"b/x/y"}},
		{"c", nil},
		{"a/zz/", nil},
		{"a/b/", nil},
	} {
		infos := list(t, ctx, s, tc.prefix)
		if got := keys(infos); !slices.Equal(got, tc.want) {
			t.Errorf("ListObjects(%q) = %q, want %q", tc.prefix, got, tc.want)
			continue
		}
		for _, info := range infos {
			if info.Size != size[info.Key] {
				t.Errorf("ListObjects(%q): %q has size %d, want %d", tc.prefix, info.Key, info.Size, size[info.Key])
			}
			wantModTime(t, "ListObjects "+info.Key, info.ModTime)
		}
	}
}

func testListEmpty(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, prefix := range []string{"", "a", "a/"} {
		if got := list(t, ctx, s, prefix); len(got) != 0 {
			t.Errorf("ListObjects(%q) on an empty store = %q", prefix, keys(got))
		}
	}
}

func testListStopsOnError(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, key := range []string{"s/1", "s/2", "s/3"} {
		put(t, ctx, s, key, []byte(key))
	}
	errStop := errors.New("stop")
	var seen []string
	err := s.ListObjects(ctx, "s/", func(info ledger.ObjectInfo) error {
		seen = append(seen, info.Key)
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Errorf("ListObjects with fn failing = %v, want fn's error", err)
	}
	if want := []string{"s/1"}; !slices.Equal(seen, want) {
		t.Errorf("ListObjects called fn for %q after it failed, want only %q", seen, want)
	}
}

func testCancelledContext(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	put(t, ctx, s, "there", []byte("x"))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.PutObject(cctx, "cancelled", strings.NewReader("x"), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("PutObject(cancelled ctx) = %v, want context.Canceled", err)
	}
	if rc, err := s.GetObject(cctx, "there"); !errors.Is(err, context.Canceled) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("GetObject(cancelled ctx) = %v, want context.Canceled", err)
	}
	if _, err := s.StatObject(cctx, "there"); !errors.Is(err, context.Canceled) {
		t.Errorf("StatObject(cancelled ctx) = %v, want context.Canceled", err)
	}
	if err := s.DeleteObject(cctx, "there"); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteObject(cancelled ctx) = %v, want context.Canceled", err)
	}
	if err := s.ListObjects(cctx, "", func(ledger.ObjectInfo) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("ListObjects(cancelled ctx) = %v, want context.Canceled", err)
	}
	wantAbsent(t, ctx, s, "cancelled")
	wantContent(t, "GetObject after cancelled delete", get(t, ctx, s, "there"), []byte("x"))
}

func testCancelDuringPut(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	for _, size := range []int64{1 << 20, -1} {
		cctx, cancel := context.WithCancel(ctx)
		r := &cancellingReader{r: bytes.NewReader(randomBytes(9, 1<<20)), cancel: cancel}
		err := s.PutObject(cctx, "cancel/during", r, size)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("PutObject(size %d) cancelled midway = %v, want context.Canceled", size, err)
		}
		wantAbsent(t, ctx, s, "cancel/during")
	}
}

// testBatch: objects put through a batch, several at once and across
// directories, read back whole through the batch's stat and, after Flush,
// through the store; none of them is listed in part.
func testBatch(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	b := s.NewBatch()
	want := map[string][]byte{}
	for i := range 24 {
		n := []int{0, 1, 300, 200 << 10}[i%4] // a zero-length object; one of several chunks
		want[fmt.Sprintf("batch/d%d/o%02d", i%3, i)] = randomBytes(uint64(100+i), n)
	}
	var g errgroup.Group
	for key, data := range want {
		g.Go(func() error {
			if err := b.PutObject(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
				return err
			}
			info, err := b.StatObject(ctx, key)
			if err != nil {
				return fmt.Errorf("batch StatObject(%q) after its put = %w", key, err)
			}
			if info.Size != int64(len(data)) {
				return fmt.Errorf("batch StatObject(%q) after its put = size %d, want %d", key, info.Size, len(data))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	for key, data := range want {
		wantContent(t, "GetObject("+key+") after Flush", get(t, ctx, s, key), data)
	}
	if got, want := keys(list(t, ctx, s, "batch/")), slices.Sorted(maps.Keys(want)); !slices.Equal(got, want) {
		t.Errorf("ListObjects(batch/) after Flush = %q, want %q", got, want)
	}
	// A flushed batch is done with: the next group takes a new one.
	b2 := s.NewBatch()
	put2 := []byte("second batch")
	if err := b2.PutObject(ctx, "batch/d0/o00", bytes.NewReader(put2), int64(len(put2))); err != nil {
		t.Fatalf("PutObject in a second batch = %v", err)
	}
	if err := b2.Flush(ctx); err != nil {
		t.Fatalf("second Flush = %v", err)
	}
	wantContent(t, "GetObject after an overwrite in a second batch", get(t, ctx, s, "batch/d0/o00"), put2)
}

// testBatchStat: the batch's stat says absent for a key never stored and
// present, with its size, for one stored before the batch; an object stored
// beside the batch after it first looked may be reported either way, but a
// put of it through the batch still leaves the batch's content.
func testBatchStat(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	put(t, ctx, s, "stat/before", []byte("before"))
	b := s.NewBatch()
	if _, err := b.StatObject(ctx, "stat/absent"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("batch StatObject(absent) = %v, want ErrNotFound", err)
	}
	if _, err := b.StatObject(ctx, "never/stored/here"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("batch StatObject(absent, in a directory never made) = %v, want ErrNotFound", err)
	}
	info, err := b.StatObject(ctx, "stat/before")
	if err != nil || info.Size != 6 || info.Key != "stat/before" {
		t.Errorf("batch StatObject(stored before) = %+v, %v, want key stat/before, size 6", info, err)
	}
	put(t, ctx, s, "stat/beside", []byte("beside"))
	if info, err := b.StatObject(ctx, "stat/beside"); err == nil && info.Size != 6 {
		t.Errorf("batch StatObject(stored beside) = size %d, want 6 or ErrNotFound", info.Size)
	} else if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("batch StatObject(stored beside) = %v, want it or ErrNotFound", err)
	}
	if err := b.PutObject(ctx, "stat/beside", strings.NewReader("mine"), 4); err != nil {
		t.Fatalf("batch PutObject over an object stored beside = %v", err)
	}
	if _, err := b.StatObject(ctx, "stat/invalid/../key"); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("batch StatObject(invalid key) = %v, want ErrInvalid", err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	wantContent(t, "GetObject after the batch's put", get(t, ctx, s, "stat/beside"), []byte("mine"))
	wantAbsent(t, ctx, s, "stat/absent")
}

// testBatchFailedPut: a put through a batch that fails (its reader, its size,
// an invalid key, a cancelled context) leaves nothing, or the previous object,
// after Flush; the batch's other objects are stored.
func testBatchFailedPut(t *testing.T, ctx context.Context, s *ledger.Bucket) {
	old := randomBytes(11, 1000)
	put(t, ctx, s, "bfail/kept", old)
	b := s.NewBatch()
	if err := b.PutObject(ctx, "bfail/kept", &failingReader{good: randomBytes(12, 300<<10), err: errBoom}, -1); !errors.Is(err, errBoom) {
		t.Errorf("batch PutObject with a failing reader = %v, want the reader's error", err)
	}
	if err := b.PutObject(ctx, "bfail/short", onlyReader{bytes.NewReader(randomBytes(13, 5))}, 10); err == nil {
		t.Error("batch PutObject(5 bytes, size 10) = nil, want an error")
	}
	if err := b.PutObject(ctx, "bfail/../up", strings.NewReader("x"), 1); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("batch PutObject(invalid key) = %v, want ErrInvalid", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.PutObject(cctx, "bfail/cancelled", strings.NewReader("x"), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("batch PutObject(cancelled ctx) = %v, want context.Canceled", err)
	}
	if err := b.PutObject(ctx, "bfail/good", strings.NewReader("good"), 4); err != nil {
		t.Fatalf("batch PutObject = %v", err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	wantContent(t, "GetObject after a failed put over it", get(t, ctx, s, "bfail/kept"), old)
	wantAbsent(t, ctx, s, "bfail/short")
	wantAbsent(t, ctx, s, "bfail/cancelled")
	wantContent(t, "GetObject of the batch's good put", get(t, ctx, s, "bfail/good"), []byte("good"))
}

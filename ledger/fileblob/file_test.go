package fileblob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/drivertest"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(Config{Dir: filepath.Join(t.TempDir(), "root")})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// open returns the bucket over a new Store, retrying nothing (the tests
// here are of the driver).
func open(cfg Config) (*ledger.Bucket, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1}), nil
}

func TestConformance(t *testing.T) {
	drivertest.TestBucket(t, drivertest.Harness{
		New: func(t *testing.T) driver.Bucket { return newStore(t) },
		// The root removed under the store (a disk unmounted): a put must
		// not make it again.
		NoBucket: func(t *testing.T) driver.Bucket {
			s := newStore(t)
			if err := os.RemoveAll(s.Dir()); err != nil {
				t.Fatal(err)
			}
			return s
		},
		// A root the process may not enter.
		Denied: func(t *testing.T) driver.Bucket {
			if os.Geteuid() == 0 {
				t.Skip("running as root: file permissions deny nothing")
			}
			s := newStore(t)
			if err := os.Chmod(s.Dir(), 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(s.Dir(), 0o755) })
			return s
		},
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("New(empty Dir) = %v, want ErrInvalid", err)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: notDir}); err == nil {
		t.Errorf("New(Dir is a file) = nil error")
	}
	missing := filepath.Join(t.TempDir(), "a", "b")
	s, err := New(Config{Dir: missing})
	if err != nil {
		t.Fatalf("New(missing dir) = %v", err)
	}
	if fi, err := os.Stat(missing); err != nil || !fi.IsDir() || s.Dir() != missing {
		t.Errorf("New(missing dir) did not create it: %v, Dir() = %q", err, s.Dir())
	}
}

// tempFiles returns the temporary files below dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestTempFilesNeverListed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	b := ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
	if err := b.PutObject(ctx, "x/a", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	// Leftovers of crashed puts, at the root and beside an object.
	for _, p := range []string{tmpPrefix + "123", filepath.Join("x", tmpPrefix+"456")} {
		if err := os.WriteFile(filepath.Join(s.Dir(), p), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := b.ListObjects(ctx, "", func(info ledger.ObjectInfo) error {
		got = append(got, info.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"x/a"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ListObjects = %q, want %q", got, want)
	}
	for _, key := range []string{tmpPrefix + "123", "x/" + tmpPrefix + "456", tmpPrefix + "d/k"} {
		if _, err := b.GetObject(ctx, key); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("GetObject(%q) = %v, want ErrInvalid", key, err)
		}
		if err := b.PutObject(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("PutObject(%q) = %v, want ErrInvalid", key, err)
		}
	}
}

type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

func TestFailedPutLeavesNoTempFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	b := ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
	boom := errors.New("boom")
	if err := b.PutObject(ctx, "d/k", &failAfter{n: 100 << 10, err: boom}, -1); !errors.Is(err, boom) {
		t.Fatalf("PutObject = %v, want boom", err)
	}
	if err := b.PutObject(ctx, "d/k", strings.NewReader("short"), 10); err == nil {
		t.Fatalf("PutObject(size mismatch) = nil")
	}
	if got := tempFiles(t, s.Dir()); len(got) != 0 {
		t.Errorf("temporary files left behind: %q", got)
	}
}

// TestKeyIsDirectory: a filesystem cannot hold "a" and "a/b" at once; the put fails
// and leaves the existing object alone.
func TestKeyIsDirectory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := ledger.NewBucket(newStore(t), ledger.RetryPolicy{Attempts: 1})
	if err := s.PutObject(ctx, "a/b", strings.NewReader("ab"), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "a", strings.NewReader("a"), 1); err == nil {
		t.Errorf("PutObject(a) while a/b exists = nil, want an error")
	}
	if err := s.PutObject(ctx, "a/b/c", strings.NewReader("abc"), 3); err == nil {
		t.Errorf("PutObject(a/b/c) while a/b exists = nil, want an error")
	}
	rc, err := s.GetObject(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "ab" {
		t.Errorf("a/b = %q after failed puts, want %q", b, "ab")
	}
}

// TestConcurrentPutGet: readers racing with writers of one key see one whole version,
// never a mix or a part. Run with -race.
func TestConcurrentPutGet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fs := newStore(t)
	s := ledger.NewBucket(fs, ledger.RetryPolicy{Attempts: 1})
	const key = "race/key"
	versions := make([][]byte, 4)
	for i := range versions {
		versions[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i)
	}
	if err := s.PutObject(ctx, key, bytes.NewReader(versions[0]), int64(len(versions[0]))); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, v := range versions {
		wg.Go(func() {
			for range 20 {
				if err := s.PutObject(ctx, key, bytes.NewReader(v), int64(len(v))); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		})
	}
	for r := range 4 {
		wg.Go(func() {
			for range 50 {
				rc, err := s.GetObject(ctx, key)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if len(b) < 64<<10 || len(b) > 64<<10+3 || !bytes.Equal(b, versions[len(b)-64<<10]) {
					t.Errorf("reader %d: read %d bytes that are no whole version", r, len(b))
					return
				}
			}
		})
	}
	wg.Wait()
	if got := tempFiles(t, fs.Dir()); len(got) != 0 {
		t.Errorf("temporary files left behind: %q", got)
	}
}

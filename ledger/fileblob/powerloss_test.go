//go:build linux

package fileblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"testing"

	"github.com/syncledger/syncledger/internal/lazyfs"
	"github.com/syncledger/syncledger/ledger"
)

// TestPowerLossFileStore: every object a Put returned for (blobs, manifests,
// snapshot files) survives power cuts on a file system that keeps only what
// was fsynced, names strictly by their directory's fsync (lazyfs): the store's
// root created on the mount included. SYNCLEDGER_TEST_POWERLOSS=1 turns it on
// (root, /dev/fuse).
func TestPowerLossFileStore(t *testing.T) {
	lfs, m := lazyfs.MountT(t)
	defer func() { _ = m.Unmount() }()
	ctx := context.Background()
	acked := map[string][]byte{}
	for cut := range 10 {
		s, err := open(Config{Dir: filepath.Join(m.Dir, "data", "blobs")})
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range acked {
			if err := holds(ctx, s, key, want); err != nil {
				t.Fatalf("cut %d: object stored before an earlier cut: %v", cut, err)
			}
		}
		for i := range 5 {
			key := fmt.Sprintf("snapshots/l/%04d-%d/s.snap", cut, i)
			b := bytes.Repeat([]byte{byte(cut), byte(i)}, 1000*(i+1))
			if err := s.PutObject(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
			acked[key] = b
		}
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		lfs.Drop()
		if m, err = lfs.Mount(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPowerLossFileBatch: every object of a batch whose Flush returned —
// what a commit may then name — survives power cuts (strict lazyfs), while the
// objects of a batch cut before its Flush may vanish but never come back in
// part: each file's content is fsynced before its rename, the names at Flush,
// one directory fsync per directory touched. The batches reach new and
// existing directories, as a commit's blobs reach a store's fan-out. An
// object put by a batch never flushed (a commit that failed before its
// publish) and then found present by a later batch — which a commit trusts
// instead of putting it again — survives once that batch's Flush returns.
func TestPowerLossFileBatch(t *testing.T) {
	lfs, m := lazyfs.MountT(t)
	defer func() { _ = m.Unmount() }()
	ctx := context.Background()
	flushed, unflushed := map[string][]byte{}, map[string][]byte{}
	lost := 0
	for cut := range 10 {
		s, err := open(Config{Dir: filepath.Join(m.Dir, "data", "blobs")})
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range flushed {
			if err := holds(ctx, s, key, want); err != nil {
				t.Fatalf("cut %d: object of a batch flushed before an earlier cut: %v", cut, err)
			}
		}
		for key, want := range unflushed {
			err := holds(ctx, s, key, want)
			if errors.Is(err, ledger.ErrNotFound) {
				lost++
			} else if err != nil {
				t.Fatalf("cut %d: object of a batch cut before its Flush, there but not whole: %v", cut, err)
			}
		}
		clear(unflushed)
		batch := func(into map[string][]byte, n int, flush bool, tag string) {
			b := s.NewBatch()
			for i := range n {
				// Directories 0–7 exist after the first cut; cut+8 is new.
				// The found objects have directories of their own: the later
				// batch's Flush syncs them, never the unflushed ones'.
				fan := fmt.Sprintf("%02x", (cut*n+i)%8+8*(i%2)*(cut%2))
				if tag == "found" {
					fan = "found" + fan
				}
				key := fmt.Sprintf("blobs/%s/%04d-%03d-%s", fan, cut, i, tag)
				data := bytes.Repeat([]byte{byte(cut), byte(i)}, 300*(i%4+1))
				if err := b.PutObject(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
					t.Fatal(err)
				}
				into[key] = data
			}
			if flush {
				if err := b.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		batch(flushed, 40, true, "flushed")
		batch(unflushed, 10, false, "unflushed")
		// Found by a later batch: flushed with it.
		found := map[string][]byte{}
		batch(found, 10, false, "found")
		later := s.NewBatch()
		for key := range found {
			if _, err := later.StatObject(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if err := later.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		maps.Copy(flushed, found)
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		lfs.Drop()
		if m, err = lfs.Mount(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
	// The control: without its Flush a batch is not durable, so the cuts
	// must have lost some of it; if none was lost, the cuts drop nothing and
	// the test proves nothing.
	if lost == 0 {
		t.Fatalf("no object of an unflushed batch was lost in 10 cuts: the cuts dropped nothing")
	}
	t.Logf("%d flushed objects survived 10 cuts; %d objects of unflushed batches lost, none in part", len(flushed), lost)
}

// holds reports whether the object key reads back as want.
func holds(ctx context.Context, s *ledger.Bucket, key string, want []byte) error {
	rc, err := s.GetObject(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("object %s holds %d bytes, want %d", key, len(got), len(want))
	}
	return nil
}

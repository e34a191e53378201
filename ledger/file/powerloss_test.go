//go:build linux

package file

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/syncledger/syncledger/internal/lazyfs"
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
		s, err := New(Config{Dir: filepath.Join(m.Dir, "data", "blobs")})
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range acked {
			rc, err := s.GetObject(ctx, key)
			if err != nil {
				t.Fatalf("cut %d: object %s, stored before an earlier cut: %v", cut, key, err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, want) {
				t.Fatalf("cut %d: object %s holds %d bytes, want %d", cut, key, len(got), len(want))
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

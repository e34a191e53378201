//go:build linux

package cachefs

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/syncledger/syncledger/ledger"
)

// BenchmarkDurableBatch is the cost of making a Ready's 1,000 new files
// (5 KiB, over 50 directories) durable, written 16 at a time as the apply's
// fetches are: WriteDeferred, then either what the
// shell does now — each file fsynced before its rename, then Flush (the
// directories, once each) — or what it did before: writes without fsync and
// one syncfs(2) of the file system (which FUSE never receives, and which
// flushes every other writer's data too). Run it on the file system the caches
// live on: BENCH_DIR=/var/tmp go test -run '^$' -bench DurableBatch ./projector/cachefs/
func BenchmarkDurableBatch(b *testing.B) {
	content := bytes.Repeat([]byte("x"), 5<<10)
	digest := ledger.DigestOf(content)
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = fmt.Sprintf("data/t/m%d/d/%d/raw", i%50, i)
	}
	for _, mode := range []string{"fsync-each+dirs", "syncfs-once"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				root, err := os.MkdirTemp(os.Getenv("BENCH_DIR"), "flush-bench-")
				if err != nil {
					b.Fatal(err)
				}
				d, err := Open(root)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var g errgroup.Group
				g.SetLimit(16) // as the apply fetches: Config.Parallel
				for _, p := range paths {
					g.Go(func() error {
						if mode == "syncfs-once" {
							return unsyncedWrite(d, p, content, digest)
						}
						_, err := d.WriteDeferred(p, bytes.NewReader(content), digest, int64(len(content)), 0o644)
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				if mode == "syncfs-once" {
					f, _ := os.Open(root)
					err = unix.Syncfs(int(f.Fd()))
					f.Close()
				} else {
					err = d.Flush(paths, nil, 16)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(root)
				b.StartTimer()
			}
		})
	}
}

// unsyncedWrite is the write before this change: verified, temp file and
// rename, no fsync.
func unsyncedWrite(d *Dir, rel string, content []byte, want ledger.Digest) error {
	missing, err := d.resolve(rel)
	abs := d.abs(rel)
	if err != nil {
		return err
	}
	if ledger.DigestOf(content) != want {
		return ledger.ErrChecksum
	}
	f, err := os.CreateTemp(d.tmp, "w-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, dir := range missing {
		if err := os.Mkdir(d.abs(dir), 0o755); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return os.Rename(f.Name(), abs)
}

package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/projector/host"
)

// b14: one large sparse file (Config.LargeMiB; 256 MiB by default) committed
// to S3 (a multipart upload above the store's threshold) and synced into a new
// cache, with the harness's peak RSS during each: memory must stay flat, not
// follow the file's size. Baselines, interleaved: the store's own PutObject of
// the file (one read, multipart), and a GetObject written to a temp file,
// fsynced and renamed.
func (r *runner) b14(ctx context.Context) error {
	size := int64(r.sz.largeMiB) << 20
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	rel := filePath(0, 0)
	src := r.e.path("b14src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(src)
	sparse := filepath.Join(src, "sparse")
	if err := makeSparse(sparse, size); err != nil {
		return err
	}
	var sCommit, sSync, sPut, sGet series
	for range r.sz.largeRuns {
		lg, err := r.e.createLedger(ctx, nc, "b14")
		if err != nil {
			return err
		}
		objs, err := r.e.s3Objects(ctx, "b14")
		if err != nil {
			return err
		}
		blobs := ledger.NewBucket(objs, noRetry)
		rawObjs, err := r.e.s3Objects(ctx, "b14raw")
		if err != nil {
			return err
		}
		var a, b *host.Host
		var dirA, dirB string
		rawKey := "raw/large"
		putOp := op{s: &sPut, run: wrap(func() error {
			f, err := os.Open(sparse)
			if err != nil {
				return err
			}
			defer f.Close()
			return rawObjs.Put(ctx, rawKey, f, size)
		})}
		commitOp := op{s: &sCommit,
			prep: func() (err error) {
				if a, dirA, err = r.openHost(lg, blobs, "b14a", "bench-b14-a"); err != nil {
					return err
				}
				p := filepath.Join(dirA, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				return makeSparse(p, size)
			},
			run: wrap(func() error {
				res, err := a.Commit(ctx, host.CommitOptions{Message: "b14"})
				if err == nil && (res.Written != 1 || res.Bytes != size) {
					err = fmt.Errorf("commit wrote %d files, %d bytes, want 1, %d", res.Written, res.Bytes, size)
				}
				return err
			}),
			done: func() error {
				a.Close()
				return os.RemoveAll(dirA)
			},
		}
		getOp := op{s: &sGet, run: wrap(func() error {
			rc, err := rawObjs.Get(ctx, rawKey)
			if err != nil {
				return err
			}
			defer rc.Close()
			return writeSynced(filepath.Join(src, "got"), rc)
		}), done: func() error { return os.Remove(filepath.Join(src, "got")) }}
		syncOp := op{s: &sSync,
			prep: func() (err error) {
				b, dirB, err = r.openHost(lg, blobs, "b14b", "bench-b14-b")
				return err
			},
			run: wrap(func() error {
				res, err := b.Sync(ctx, host.SyncOptions{})
				if err == nil && (res.Written != 1 || res.Bytes != size) {
					err = fmt.Errorf("sync wrote %d files, %d bytes, want 1, %d", res.Written, res.Bytes, size)
				}
				return err
			}),
			done: func() error {
				b.Close()
				os.RemoveAll(dirB)
				for _, o := range []driver.Bucket{objs, rawObjs} {
					_ = o.List(ctx, "", func(info ledger.ObjectInfo) error { return o.Delete(ctx, info.Key) })
				}
				return lg.Delete(ctx)
			},
		}
		for _, o := range []op{putOp, commitOp, getOp, syncOp} {
			// The peak is measured from the RSS at the start: give back what
			// earlier scenarios and operations left, so it is this one's.
			prep := o.prep
			o.prep = func() error {
				if prep != nil {
					if err := prep(); err != nil {
						return err
					}
				}
				debug.FreeOSMemory()
				return nil
			}
			if err := r.e.measure(o, false); err != nil {
				return err
			}
		}
	}
	label := fmt.Sprintf("1 sparse file of %s, S3 blobs", mibLabel(r.sz.largeMiB))
	const slack = 32 << 20
	for _, m := range []struct {
		name, baseline string
		s, raw         *series
	}{
		{"commit of a large file (streamed: hash, then multipart upload)", "the store's PutObject of the file (multipart)", &sCommit, &sPut},
		{"sync of a large file into a new cache", "GetObject to a temp file, fsync, rename", &sSync, &sGet},
	} {
		row := latencyRow("B14", m.name, label, m.s, m.raw, m.baseline)
		flat := row.PeakRSS <= m.raw.peak+slack
		row.Note = fmt.Sprintf("peak RSS %s, the baseline's %s; the file is %s", fmtBytes(row.PeakRSS), fmtBytes(m.raw.peak), mibLabel(r.sz.largeMiB))
		if r.e.s3.pid == 0 && r.e.s3.stop != nil {
			// gofakes3 keeps the objects in this process: its RSS says nothing.
			row.Note += "; no verdict: the S3 server runs in this process, so its RSS holds the objects"
		} else {
			row.check("peak RSS ≤ the baseline's + 32 MiB (flat)", flat && row.PeakRSS > 0)
		}
		r.add(row)
	}
	return nil
}

func mibLabel(mib int) string {
	if mib >= 1024 && mib%1024 == 0 {
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}

// makeSparse creates a file of size bytes with no block written.
func makeSparse(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeSynced writes r to a temp file beside p, fsyncs it and renames it to p.
func writeSynced(p string, r io.Reader) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".raw-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := ledger.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

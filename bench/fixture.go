package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
)

// requestTimeout bounds the harness's own requests.
const requestTimeout = 30 * time.Second

// dataset is a ledger holding one commit per 50 models of a layout's files, with
// their blobs on S3: what the sync rows read.
type dataset struct {
	l       layout
	gen     int
	nc      *nats.Conn
	log     *natsjs.Log
	objs    driver.Bucket // the raw store, for the raw loops
	blobs   *ledger.Bucket
	digests [][]ledger.Digest // [model][file]
}

// events is the number of events in the data set's log (one per model).
func (d *dataset) events() int { return d.l.Models }

// keys returns the blob keys of the given models' files.
func (d *dataset) keys(models ...int) []string {
	var ks []string
	for _, m := range models {
		for _, dg := range d.digests[m] {
			ks = append(ks, ledger.BlobKey(dg))
		}
	}
	return ks
}

func (d *dataset) allKeys() []string {
	ms := make([]int, d.l.Models)
	for i := range ms {
		ms[i] = i
	}
	return d.keys(ms...)
}

// dataset returns the data set of n files on S3, seeding it on first use.
func (r *runner) dataset(ctx context.Context, n int) (*dataset, error) {
	if d, ok := r.sets[n]; ok {
		return d, nil
	}
	d, err := r.newDataset(ctx, n, "s3")
	if err == nil {
		r.sets[n] = d
	}
	return d, err
}

// natsDataset is the data set of n files with its blobs in the NATS object
// store (nats://, the default of `syncledger init`) on the bench's server; B4's
// nats:// row. It is not kept: each call seeds a new one.
func (r *runner) natsDataset(ctx context.Context, n int) (*dataset, error) {
	return r.newDataset(ctx, n, "nats")
}

// newDataset seeds a data set of n files, its blobs on S3 or (store "nats")
// in a NATS object store bucket.
func (r *runner) newDataset(ctx context.Context, n int, store string) (*dataset, error) {
	t0 := time.Now()
	nc, err := r.e.connect()
	if err != nil {
		return nil, err
	}
	r.closes = append(r.closes, nc.Close)
	stem := fmt.Sprintf("d%d", n)
	if store == "nats" {
		stem = fmt.Sprintf("n%d", n)
	}
	lg, err := r.e.createLedger(ctx, nc, stem)
	if err != nil {
		return nil, err
	}
	var objs driver.Bucket
	if store == "nats" {
		objs, err = natsblob.New(ctx, natsblob.Config{Conn: nc, Bucket: r.e.name(stem)})
	} else {
		objs, err = r.e.s3Objects(ctx, stem)
	}
	if err != nil {
		return nil, err
	}
	d := &dataset{l: layoutOf(n, r.sz.fileSize), gen: n, nc: nc, log: lg, objs: objs, blobs: ledger.NewBucket(objs, ledger.RetryPolicy{})}
	if err := seedLedger(ctx, lg, objs, d.l, d.gen); err != nil {
		return nil, err
	}
	d.digests = make([][]ledger.Digest, d.l.Models)
	for m := range d.l.Models {
		for f := range d.l.PerModel {
			d.digests[m] = append(d.digests[m], ledger.DigestOf(content(d.gen, m, f, d.l.Size)))
		}
	}
	r.e.logf("bench: data set of %d files (%d models) on %s seeded in %s", n, d.l.Models, store, time.Since(t0).Round(time.Millisecond))
	return d, nil
}

// openHost opens a host on a new cache directory.
func (r *runner) openHost(lg ledger.CommitLog, blobs *ledger.Bucket, stem, id string) (*host.Host, string, error) {
	dir := r.e.path("caches", r.e.name(stem))
	h, err := host.Open(host.Config{Cache: dir, Host: id, Log: lg, Blobs: blobs, Parallel: r.sz.parallel})
	if err != nil {
		return nil, "", err
	}
	return h, dir, nil
}

// keepHost registers a host to close (and its cache to remove) at the end.
func (r *runner) keepHost(h *host.Host, dir string) {
	r.closes = append(r.closes, func() {
		h.Close()
		os.RemoveAll(dir)
	})
}

// syncedHost returns a host that has fully synced the data set of n files: the
// one B4 left, or a new one.
func (r *runner) syncedHost(ctx context.Context, n int) (*host.Host, error) {
	if h, ok := r.synced[n]; ok {
		return h, nil
	}
	d, err := r.dataset(ctx, n)
	if err != nil {
		return nil, err
	}
	h, dir, err := r.openHost(d.log, d.blobs, fmt.Sprintf("synced%d", n), "bench-a")
	if err != nil {
		return nil, err
	}
	r.keepHost(h, dir)
	res, err := h.Sync(ctx, host.SyncOptions{})
	if err != nil {
		return nil, err
	}
	if res.Written != d.l.Files() {
		return nil, fmt.Errorf("sync of %d files wrote %d", d.l.Files(), res.Written)
	}
	r.synced[n] = h
	return h, nil
}

func sizeLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func bytesLabel(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

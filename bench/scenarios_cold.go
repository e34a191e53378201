package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
)

// sampleEvent encodes a valid event holding files 0..k-1 of model m: the payload
// of the raw publishes, the size of the Log's.
func sampleEvent(uuid string, m, k, size int) ([]byte, error) {
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		return nil, err
	}
	ev := ledger.Event{
		V: ledger.FormatVersion, Ledger: uuid, Commit: id, Host: "bench", At: time.Now(),
		Partition: ledger.PartitionKey(filePath(m, 0)), ModelSeq: 1, Parts: 1, Part: 1,
	}
	for f := range k {
		ev.Entries = append(ev.Entries, ledger.Entry{Path: filePath(m, f), SHA256: ledger.DigestOf(content(0, m, f, size)), Size: int64(size), Mode: 0o644})
	}
	return ledger.EncodeEvent(ev)
}

func filesLabel(l layout) string {
	return fmt.Sprintf("%s files × %s over %d models", sizeLabel(l.Files()), bytesLabel(l.Size), l.Models)
}

// b6: a host commits l.Files() new files to a fresh ledger whose blobs are on
// S3 (none of them stored yet), against PUTs of the same content and one atomic
// batch of as many events.
func (r *runner) b6(ctx context.Context) error {
	l := layoutOf(r.sz.files, r.sz.fileSize)
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	rawLog, err := r.e.createLedger(ctx, nc, "b6raw")
	if err != nil {
		return err
	}
	payload, err := sampleEvent(rawLog.UUID(), 0, l.PerModel, l.Size)
	if err != nil {
		return err
	}
	var sHost, sRaw series
	gen := 100_000
	for i := range r.sz.coldWarm + r.sz.coldRuns {
		warm := i < r.sz.coldWarm
		var (
			h   *host.Host
			dir string
			lg  *natsjs.Log
		)
		hostOp := op{s: &sHost,
			prep: func() error {
				var err error
				if lg, err = r.e.createLedger(ctx, nc, "b6"); err != nil {
					return err
				}
				objs, err := r.e.s3Objects(ctx, "b6")
				if err != nil {
					return err
				}
				if h, dir, err = r.openHost(lg, ledger.NewBucket(objs, noRetry), "b6", "bench-b6"); err != nil {
					return err
				}
				gen++
				return writeTree(dir, l, gen)
			},
			run: wrap(func() error {
				res, err := h.Commit(ctx, host.CommitOptions{Message: "b6"})
				if err == nil && res.Written != l.Files() {
					err = fmt.Errorf("commit wrote %d files, want %d", res.Written, l.Files())
				}
				return err
			}),
			done: func() error {
				h.Close()
				os.RemoveAll(dir)
				return lg.Delete(ctx)
			},
		}
		var (
			objs   driver.Bucket
			keys   []string
			bodies [][]byte
			bp     *batchPublisher
		)
		rawOp := op{s: &sRaw,
			prep: func() error {
				var err error
				if objs, err = r.e.s3Objects(ctx, "b6raw"); err != nil {
					return err
				}
				gen++
				keys, bodies = nil, nil
				bp = &batchPublisher{js: js, stream: rawLog.Stream(), data: payload, prev: make([]uint64, l.Models)}
				for m := range l.Models {
					for f := range l.PerModel {
						b := content(gen, m, f, l.Size)
						keys, bodies = append(keys, ledger.BlobKey(ledger.DigestOf(b))), append(bodies, b)
					}
					bp.subjs = append(bp.subjs, ledger.Subject(rawLog.Name(), fmt.Sprintf("r%d-m%d", i, m)))
				}
				return nil
			},
			run: wrap(func() error {
				if err := rawPuts(ctx, objs, keys, bodies, r.sz.parallel); err != nil {
					return err
				}
				return bp.publish(ctx)
			}),
		}
		if err := r.e.measure(rawOp, warm); err != nil {
			return fmt.Errorf("raw: %w", err)
		}
		if err := r.e.measure(hostOp, warm); err != nil {
			return err
		}
	}
	row := latencyRow("B6", "cold commit to S3", filesLabel(l), &sHost, &sRaw,
		fmt.Sprintf("%d PUT ∥%d + 1 atomic batch of %d", l.Files(), r.sz.parallel, l.Models))
	row.check("≤ 400 ms", row.Median <= 400)
	r.add(row)
	return nil
}

// b4: a new host syncs a data set of n files from S3, against an
// ordered-consumer read of its events and GETs of its blobs.
func (r *runner) b4(ctx context.Context) error {
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	sizes := append([]int{r.sz.files}, r.sz.b4Scale...)
	for i := range 2 * len(sizes) {
		// S3 first, at every size; then nats:// (the default blob store of
		// `syncledger init`, issue 26 point 11), at every size.
		n, store := sizes[i%len(sizes)], "s3"
		var d *dataset
		if i >= len(sizes) {
			store = "nats"
			d, err = r.natsDataset(ctx, n)
		} else {
			d, err = r.dataset(ctx, n)
		}
		if err != nil {
			return err
		}
		runs := r.sz.coldRuns
		if n != r.sz.files {
			runs = r.sz.scaleRuns
		}
		keys := d.allKeys()
		var sHost, sRaw series
		for i := range r.sz.coldWarm + runs {
			warm, last := i < r.sz.coldWarm, i == r.sz.coldWarm+runs-1
			var (
				h   *host.Host
				dir string
			)
			hostOp := op{s: &sHost,
				prep: func() (err error) {
					h, dir, err = r.openHost(d.log, d.blobs, "b4", "bench-a")
					return err
				},
				run: wrap(func() error {
					res, err := h.Sync(ctx, host.SyncOptions{})
					if err == nil && res.Written != n {
						err = fmt.Errorf("sync wrote %d files, want %d", res.Written, n)
					}
					return err
				}),
				done: func() error {
					if last && store == "s3" && r.synced[n] == nil {
						r.keepHost(h, dir) // B1–B3 and B8 use it
						r.synced[n] = h
						return nil
					}
					h.Close()
					return os.RemoveAll(dir)
				},
			}
			rawOp := op{s: &sRaw, run: wrap(func() error {
				if _, err := rawOrderedRead(ctx, nc, d.log.Stream(), 1, d.events()); err != nil {
					return err
				}
				return rawGets(ctx, d.objs, keys, r.sz.parallel)
			})}
			if err := r.e.measure(rawOp, warm); err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			if err := r.e.measure(hostOp, warm); err != nil {
				return err
			}
		}
		what, raw := "cold full sync from S3", fmt.Sprintf("ordered-consumer read of the %d events + %d GET ∥%d", d.events(), n, r.sz.parallel)
		if store == "nats" {
			what, raw = "cold full sync from nats://", fmt.Sprintf("ordered-consumer read of the %d events + %d object gets ∥%d", d.events(), n, r.sz.parallel)
		}
		row := latencyRow("B4", what, filesLabel(d.l), &sHost, &sRaw, raw)
		if n == r.sz.files && store == "s3" {
			row.check("≤ 280 ms", row.Median <= 280)
		}
		r.add(row)
	}
	return nil
}

// b5: a new host syncs one model (swamp's three partition keys of it; 20 files)
// of the data set from S3.
func (r *runner) b5(ctx context.Context) error {
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		return err
	}
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	var sHost, sRaw series
	for i := range r.sz.scopedWarm + r.sz.scopedRuns {
		m := i % d.l.Models
		var (
			h   *host.Host
			dir string
		)
		hostOp := op{s: &sHost,
			prep: func() (err error) {
				h, dir, err = r.openHost(d.log, d.blobs, "b5", "bench-b5")
				return err
			},
			run: wrap(func() error {
				res, err := h.Sync(ctx, host.SyncOptions{Partitions: modelKeys(m)})
				if err == nil && res.Written != d.l.PerModel {
					err = fmt.Errorf("scoped sync wrote %d files, want %d", res.Written, d.l.PerModel)
				}
				return err
			}),
			done: func() error {
				h.Close()
				return os.RemoveAll(dir)
			},
		}
		keys := d.keys(m)
		rawOp := op{s: &sRaw, run: wrap(func() error {
			if err := rawDirectLasts(ctx, nc, d.log, modelKeys(m)); err != nil {
				return err
			}
			if n, err := rawDirectBatch(ctx, nc, d.log.Stream(), ledger.Subject(d.log.Name(), ledger.PartitionKey(filePath(m, 0)))); err != nil || n != 1 {
				return fmt.Errorf("direct get batch: %d messages, %v", n, err)
			}
			return rawGets(ctx, d.objs, keys, r.sz.parallel)
		})}
		warm := i < r.sz.scopedWarm
		if err := r.e.measure(rawOp, warm); err != nil {
			return fmt.Errorf("raw: %w", err)
		}
		if err := r.e.measure(hostOp, warm); err != nil {
			return err
		}
	}
	row := latencyRow("B5", "scoped sync of 1 model from S3", fmt.Sprintf("%d files of %s", d.l.PerModel, filesLabel(d.l)), &sHost, &sRaw,
		fmt.Sprintf("3 DIRECT.GET last (at once), 1 batched DIRECT.GET, %d GET ∥%d", d.l.PerModel, r.sz.parallel))
	row.check("≤ 7 ms", row.Median <= 7)
	r.add(row)
	return nil
}

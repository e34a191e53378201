package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
)

type appliedAt struct {
	at    time.Time
	paths []string
}

// b8: host A commits one new file; host B, watching, has it in its cache.
// Latency: from the start of A's commit to B's watch reporting the commit
// applied (file written and durable, state persisted). Baseline: a JetStream
// publish on one connection until an ordered consumer on another receives it.
func (r *runner) b8(ctx context.Context) error {
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		return err
	}
	a, err := r.syncedHost(ctx, r.sz.files)
	if err != nil {
		return err
	}
	b, dirB, err := r.openHost(d.log, d.blobs, "b8", "bench-b")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dirB)
	defer b.Close()
	if _, err := b.Sync(ctx, host.SyncOptions{}); err != nil {
		return err
	}
	applied := make(chan appliedAt, 64)
	wctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		werr error
	)
	wg.Go(func() {
		werr = b.Watch(wctx, host.SyncOptions{}, func(res host.SyncResult) {
			applied <- appliedAt{time.Now(), res.Paths}
		})
	})
	defer func() {
		cancel()
		wg.Wait()
	}()

	ncPub, err := r.e.connect()
	if err != nil {
		return err
	}
	defer ncPub.Close()
	ncSub, err := r.e.connect()
	if err != nil {
		return err
	}
	defer ncSub.Close()
	rawLog, err := r.e.createLedger(ctx, ncPub, "b8raw")
	if err != nil {
		return err
	}
	jsPub, err := jetstream.New(ncPub)
	if err != nil {
		return err
	}
	jsSub, err := jetstream.New(ncSub)
	if err != nil {
		return err
	}
	cons, err := jsSub.OrderedConsumer(ctx, rawLog.Stream(), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	received := make(chan time.Time, 64)
	go func() {
		for {
			if _, err := it.Next(); err != nil {
				return
			}
			received <- time.Now()
		}
	}()
	payload, err := sampleEvent(rawLog.UUID(), 0, 1, r.sz.fileSize)
	if err != nil {
		return err
	}
	subj := ledger.Subject(rawLog.Name(), "b8")
	const wait = 30 * time.Second
	var sRaw, sHost series
	rawOp := op{s: &sRaw, run: func() (time.Duration, int, error) {
		t0 := time.Now()
		if _, err := jsPub.Publish(ctx, subj, payload); err != nil {
			return 0, 0, err
		}
		select {
		case t := <-received:
			return t.Sub(t0), 1, nil
		case <-time.After(wait):
			return 0, 0, errors.New("raw: message not delivered within 30s")
		}
	}}
	i := 0
	var path string
	hostOp := op{s: &sHost,
		prep: func() error {
			i++
			path = fmt.Sprintf("data/%s/%s/b8-%05d.json", modelType(0), modelID(0), i)
			p := filepath.Join(a.Dir().Root(), filepath.FromSlash(path))
			return os.WriteFile(p, content(-1, 0, i, r.sz.fileSize), 0o644)
		},
		run: func() (time.Duration, int, error) {
			t0 := time.Now()
			if _, err := a.Commit(ctx, host.CommitOptions{Message: "b8"}); err != nil {
				return 0, 0, err
			}
			for {
				select {
				case ap := <-applied:
					if slices.Contains(ap.paths, path) {
						return ap.at.Sub(t0), 1, nil
					}
				case <-time.After(wait):
					return 0, 0, fmt.Errorf("%s not applied by the watching host within 30s (watch: %v)", path, werr)
				}
			}
		},
	}
	if err := r.e.interleave(ctx, r.sz.b8Warm, r.sz.b8Samples, rawOp, hostOp); err != nil {
		return err
	}
	row := latencyRow("B8", "propagation: commit on A → file in B's cache (watch)", "1 file × "+bytesLabel(r.sz.fileSize)+", S3 blobs", &sHost, &sRaw, "publish → ordered-consumer delivery")
	row.check("p99 < 50 ms", row.P99 < 50)
	r.add(row)
	return nil
}

// runFor runs every worker in a loop until dur has passed, and returns the wall
// time until all finished and how many calls completed.
func runFor(dur time.Duration, workers []func() error) (time.Duration, int, error) {
	var (
		n    atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := time.Now()
	deadline := start.Add(dur)
	for _, f := range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := f(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return time.Since(start), int(n.Load()), errors.Join(errs...)
}

// b7: commit throughput of 8 writers (8 hosts, each its own connection and
// cache) committing to distinct models with a file blob store, against 8
// publishers doing the raw equivalent: a CAS publish for single-partition
// commits, an atomic batch for 3-partition ones. Each commit names the paths
// it wrote (CommitOptions.Changed), as the product's writers do: swamp's
// extension from its dirty set, `syncledger commit` from `watch`'s.
func (r *runner) b7(ctx context.Context) error {
	for _, parts := range []int{1, 3} {
		if err := r.b7parts(ctx, parts); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) b7parts(ctx context.Context, parts int) error {
	const writers, fileSize = 8, 256
	objs, err := r.e.fileObjects(r.e.name("b7blobs"))
	if err != nil {
		return err
	}
	blobs := ledger.NewBucket(objs, noRetry)
	nc0, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc0.Close()
	lg, err := r.e.createLedger(ctx, nc0, fmt.Sprintf("b7p%d", parts))
	if err != nil {
		return err
	}
	rawLog, err := r.e.createLedger(ctx, nc0, fmt.Sprintf("b7p%draw", parts))
	if err != nil {
		return err
	}
	payload, err := sampleEvent(rawLog.UUID(), 0, 1, fileSize)
	if err != nil {
		return err
	}
	commits := make([]func() error, writers)
	pubs := make([]func() error, writers)
	for w := range writers {
		nc, err := r.e.connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		wl, err := natsjs.OpenLog(ctx, nc, lg.Name())
		if err != nil {
			return err
		}
		h, dir, err := r.openHost(wl, blobs, "b7", fmt.Sprintf("writer-%d", w))
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		defer h.Close()
		models := make([]int, parts)
		changed := make([]string, parts)
		for j := range models {
			models[j] = w*parts + j
			changed[j] = filePath(models[j], 0)
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(filepath.Dir(filePath(models[j], 0)))), 0o755); err != nil {
				return err
			}
		}
		gen := 0
		commits[w] = func() error {
			gen++
			for _, m := range models {
				p := filepath.Join(dir, filepath.FromSlash(filePath(m, 0)))
				if err := os.WriteFile(p, content(gen, m, 0, fileSize), 0o644); err != nil {
					return err
				}
			}
			res, err := h.Commit(ctx, host.CommitOptions{Message: "b7", Changed: changed})
			if err == nil && len(res.Seqs) != parts {
				err = fmt.Errorf("commit of %d partitions has %d events", parts, len(res.Seqs))
			}
			return err
		}
		ncRaw, err := r.e.connect()
		if err != nil {
			return err
		}
		defer ncRaw.Close()
		js, err := jetstream.New(ncRaw)
		if err != nil {
			return err
		}
		if parts == 1 {
			p := &casPublisher{js: js, stream: rawLog.Stream(), subj: ledger.Subject(rawLog.Name(), fmt.Sprintf("w%d", w)), data: payload}
			pubs[w] = func() error { return p.publish(ctx) }
		} else {
			p := &batchPublisher{js: js, stream: rawLog.Stream(), data: payload, prev: make([]uint64, parts)}
			for j := range parts {
				p.subjs = append(p.subjs, ledger.Subject(rawLog.Name(), fmt.Sprintf("w%d-%d", w, j)))
			}
			pubs[w] = func() error { return p.publish(ctx) }
		}
	}
	var sHost, sRaw series
	err = r.e.interleave(ctx, 1, r.sz.b7Runs,
		op{s: &sRaw, run: func() (time.Duration, int, error) { return runFor(r.sz.b7Dur, pubs) }},
		op{s: &sHost, run: func() (time.Duration, int, error) { return runFor(r.sz.b7Dur, commits) }},
	)
	if err != nil {
		return err
	}
	if parts == 1 {
		row := rateRow("B7", "commit throughput, 8 writers, 1 partition each", "1 file × 256 B per commit, file blobs", "commits/s", &sHost, &sRaw,
			"8 publishers, CAS publish (expected last subject seq)")
		row.check("≥ 50% of raw", row.Ratio >= 0.5)
		r.add(row)
	} else {
		row := rateRow("B7", "commit throughput, 8 writers, 3 partitions each", "3 files × 256 B per commit, file blobs", "commits/s", &sHost, &sRaw,
			"8 publishers, atomic batch of 3")
		row.check("≥ 50% of raw", row.Ratio >= 0.5)
		r.add(row)
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISS"
}

// b9: replay a log of n single-file commits, metadata only, in a child process
// (its peak RSS is the replay's): a lazy full sync into a new cache (index and
// marks persisted, no blob fetched), and snapshot.Build (state in memory only),
// against an ordered-consumer read of the same messages.
func (r *runner) b9(ctx context.Context) error {
	n := r.sz.b9Commits
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	lg, err := r.e.createLedger(ctx, nc, "b9")
	if err != nil {
		return err
	}
	t0 := time.Now()
	l := layoutOf(r.sz.files, r.sz.fileSize)
	if err := seedCommits(ctx, nc, lg, l, n); err != nil {
		return err
	}
	r.e.logf("bench: %d commits published in %s", n, time.Since(t0).Round(time.Millisecond))
	blobsDir := r.e.path("b9blobs")
	runOne := func(s *series, mode string) error {
		sp := childSpec{Role: "replay", NATS: r.e.natsURL, Ledger: lg.Name(), Blobs: blobsDir, Mode: mode, N: n}
		if r.e.cfg.ChildProfile != "" {
			sp.CPUProfile = r.e.cfg.ChildProfile + "." + mode
		}
		if mode == replayLazySync {
			sp.Cache = r.e.path("caches", r.e.name("b9"))
			defer os.RemoveAll(sp.Cache)
		}
		n0 := procCPU(r.e.nats.pid)
		res, cpu, rss, err := r.e.runChild(sp)
		n1 := procCPU(r.e.nats.pid)
		if err != nil {
			return fmt.Errorf("%s child: %w", mode, err)
		}
		if s != nil {
			s.child = true
			s.add(res.Elapsed, res.Events, cpuSample{client: cpu, nats: n1 - n0}, rss)
		}
		return nil
	}
	if err := runOne(nil, replayRaw); err != nil { // warm-up
		return err
	}
	var sRaw, sSync, sBuild series
	for range r.sz.b9Runs {
		for _, m := range []struct {
			s    *series
			mode string
		}{{&sRaw, replayRaw}, {&sSync, replayLazySync}, {&sBuild, replayBuild}} {
			if err := runOne(m.s, m.mode); err != nil {
				return err
			}
		}
	}
	size := fmt.Sprintf("%s commits × 1 file over %d files", sizeLabel(n), l.Files())
	const baseline = "ordered-consumer read, no decoding (child process)"
	const target = "≥ 50% of raw; RSS < 200 MiB"
	for _, m := range []struct {
		name string
		s    *series
	}{{"replay metadata-only: lazy full sync (host.Sync, Lazy)", &sSync}, {"replay into state only (snapshot.Build)", &sBuild}} {
		row := rateRow("B9", m.name, size, "events/s", m.s, &sRaw, baseline)
		rate, rss := row.Ratio >= 0.5, row.PeakRSS < 200<<20
		row.check(target, rate && rss)
		row.Note = fmt.Sprintf("rate %s (%.0f%% of raw), peak RSS %s (%s)", verdict(rate), 100*row.Ratio, verdict(rss), fmtBytes(row.PeakRSS))
		r.add(row)
	}
	return nil
}

package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

func noopSync(ctx context.Context, h *host.Host, opt host.SyncOptions) func() error {
	return func() error {
		res, err := h.Sync(ctx, opt)
		if err == nil && !res.UpToDate {
			err = fmt.Errorf("no-op sync was not up to date: %+v", res)
		}
		return err
	}
}

// b1: the no-op full sync on a synced cache of the data set, and on caches
// whose index (built with statedb) holds 10k to 1M entries, interleaved with
// the one request it needs.
func (r *runner) b1(ctx context.Context) error {
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		return err
	}
	h1k, err := r.syncedHost(ctx, r.sz.files)
	if err != nil {
		return err
	}
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	info, err := d.log.Info(ctx)
	if err != nil {
		return err
	}
	head, err := d.log.LastSeq(ctx)
	if err != nil {
		return err
	}
	top, err := d.log.CommitAt(ctx, head)
	if err != nil {
		return err
	}
	var sRaw, s1k series
	ops := []op{
		{s: &sRaw, run: wrap(func() error { _, err := rawStreamInfo(ctx, nc, d.log.Stream()); return err })},
		{s: &s1k, run: wrap(noopSync(ctx, h1k, host.SyncOptions{}))},
	}
	scaled := make([]series, len(r.sz.b1Scale))
	for j, n := range r.sz.b1Scale {
		dir := r.e.path("caches", r.e.name(fmt.Sprintf("b1-%d", n)))
		t0 := time.Now()
		if err := buildIndex(dir, info, head, top, n); err != nil {
			return err
		}
		h, err := host.Open(host.Config{Cache: dir, Host: "bench-a", Log: d.log, Blobs: d.blobs})
		if err != nil {
			return err
		}
		r.keepHost(h, dir)
		fi, _ := os.Stat(filepath.Join(dir, ledger.StateDir, "state.db"))
		r.e.logf("bench: index of %d entries built in %s (state.db %s)", n, time.Since(t0).Round(time.Millisecond), fmtBytes(fi.Size()))
		ops = append(ops, op{s: &scaled[j], run: wrap(noopSync(ctx, h, host.SyncOptions{}))})
	}
	if err := r.e.interleave(ctx, r.sz.noopWarm, r.sz.noopSamples, ops...); err != nil {
		return err
	}
	const baseline = "1 STREAM.INFO request"
	row := latencyRow("B1", "no-op full sync", sizeLabel(r.sz.files)+" files (synced cache)", &s1k, &sRaw, baseline)
	row.check("≤ 0.5 ms", row.Median <= 0.5)
	r.add(row)
	base := row.Median
	for j, n := range r.sz.b1Scale {
		row := latencyRow("B1", "no-op full sync", sizeLabel(n)+"-entry index (built with statedb)", &scaled[j], &sRaw, baseline)
		flat := row.Median / base
		row.Note = fmt.Sprintf("%.2f× the %s-file median", flat, sizeLabel(r.sz.files))
		if j == len(r.sz.b1Scale)-1 {
			row.check(fmt.Sprintf("≤ 1.2× the %s figure (flat)", sizeLabel(r.sz.files)), flat <= 1.2)
		}
		r.add(row)
	}
	return nil
}

// b2: the no-op sync scoped to one model (its three partition keys) on the
// synced cache, against the three direct gets it needs.
func (r *runner) b2(ctx context.Context) error {
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		return err
	}
	h, err := r.syncedHost(ctx, r.sz.files)
	if err != nil {
		return err
	}
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	keys := modelKeys(0)
	var sRaw, sHost series
	err = r.e.interleave(ctx, r.sz.noopWarm, r.sz.noopSamples,
		op{s: &sRaw, run: wrap(func() error { return rawDirectLasts(ctx, nc, d.log, keys) })},
		op{s: &sHost, run: wrap(noopSync(ctx, h, host.SyncOptions{Partitions: keys}))},
	)
	if err != nil {
		return err
	}
	row := latencyRow("B2", "no-op sync scoped to 1 model (3 partition keys)", sizeLabel(r.sz.files)+" files (synced cache)", &sHost, &sRaw, "3 DIRECT.GET last_by_subj requests in flight at once")
	row.check("≤ 0.5 ms", row.Median <= 0.5)
	r.add(row)
	return nil
}

// b3: the no-op commit on the synced caches (the data set's, and the larger
// ones B4 left), against one stream info request.
func (r *runner) b3(ctx context.Context) error {
	d, err := r.dataset(ctx, r.sz.files)
	if err != nil {
		return err
	}
	if _, err := r.syncedHost(ctx, r.sz.files); err != nil {
		return err
	}
	nc, err := r.e.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	var ns []int
	for n := range r.synced {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	var sRaw series
	ss := make([]series, len(ns))
	walks := make([]series, len(ns)) // the floor of any commit that walks the cache
	ops := []op{{s: &sRaw, run: wrap(func() error { _, err := rawStreamInfo(ctx, nc, d.log.Stream()); return err })}}
	for i, n := range ns {
		h := r.synced[n]
		ops = append(ops, op{s: &walks[i], run: wrap(func() error { return walkCache(h.Dir().Root(), n) })})
		ops = append(ops, op{s: &ss[i], run: wrap(func() error {
			res, err := h.Commit(ctx, host.CommitOptions{})
			if err == nil && !res.Nothing {
				err = fmt.Errorf("no-op commit committed %d files", res.Written)
			}
			return err
		})})
	}
	if err := r.e.interleave(ctx, r.sz.commitWarm, r.sz.commitSamples, ops...); err != nil {
		return err
	}
	for i, n := range ns {
		row := latencyRow("B3", "no-op commit", sizeLabel(n)+" files (synced cache)", &ss[i], &sRaw, "1 STREAM.INFO request")
		walk := latencyRow("", "", "", &walks[i], nil, "")
		row.Note = fmt.Sprintf("a bare filepath.WalkDir with an lstat of every file of this cache (the floor of any commit that walks the cache) takes %s ms median, %.0f%% of the no-op commit", fmtNum(walk.Median), 100*walk.Median/row.Median)
		if n == r.sz.files {
			row.check("≤ 0.5 ms", row.Median <= 0.5)
		}
		r.add(row)
	}
	return nil
}

// walkCache walks a cache as a commit's scan must, at the least: every
// directory read, every file lstat'ed (WalkDir plus DirEntry.Info).
func walkCache(root string, want int) error {
	n := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if e.Name() == ledger.StateDir {
				return filepath.SkipDir
			}
			return nil
		}
		if _, err := e.Info(); err != nil {
			return err
		}
		n++
		return nil
	})
	if err == nil && n < want {
		err = fmt.Errorf("walk found %d files, want at least %d", n, want)
	}
	return err
}

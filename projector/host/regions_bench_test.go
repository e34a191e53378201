package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// BenchmarkRegion (issue 40): with an 80 ms round trip injected between
// the regions (natsjstest.Regions.SetRTT, both ways), what a region-B host
// pays, each beside its baseline in the same run — the same operation of a
// host next to the origin:
//
//   - raw-stream-info: the one request a no-op sync makes, bare, to the
//     origin's server and to the mirror's;
//   - noop-sync: a full sync with nothing new (the target: through the
//     mirror ≤ 1.2× the local origin's); and the same against the far
//     origin without a mirror;
//   - locked-pull: a fresh sync (a swamp pull under a lock): one origin
//     round trip by design;
//   - commit: one changed file (upload to a local file blob store, then the
//     append to the origin: one round trip plus the upload).
//
// Run:
//
//	go test -run '^$' -bench Region -benchtime 30x ./projector/host/
func BenchmarkRegion(b *testing.B) {
	ctx := context.Background()
	r := natsjstest.RunRegions(b)
	nc := natsjstest.Connect(b, r.Origin.ClientURL())
	origin, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "bench", Blobs: "file:///unused"})
	if err != nil {
		b.Fatal(err)
	}
	admin, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: r.Origin.ClientURL()}, Read: natsjs.Endpoint{URL: r.Mirror.ClientURL()}})
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateMirror(ctx, "bench", 1); err != nil {
		b.Fatal(err)
	}
	objs, err := fileblob.New(fileblob.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	blobs := ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	open := func(name string, l ledger.CommitLog) *Host {
		h, err := Open(Config{Cache: b.TempDir(), Host: name, Log: l, Blobs: blobs})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		return h
	}
	logOf := func(cfg natsjs.Config) ledger.CommitLog {
		c, err := natsjs.Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		l, err := c.Ledger("bench").Log(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	local := open("local", origin)
	viaMirror := open("b-mirror", logOf(natsjs.Config{Write: natsjs.Endpoint{URL: r.FarURL()}, Read: natsjs.Endpoint{URL: r.Mirror.ClientURL()}}))
	farOrigin := open("b-origin", logOf(natsjs.Config{Write: natsjs.Endpoint{URL: r.FarURL()}}))
	write := func(h *Host, i int) {
		p := filepath.Join(h.Dir().Root(), "data", "m", h.cfg.Host)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "%d", i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write(local, 0)
	if _, err := local.Commit(ctx, CommitOptions{Message: "seed"}); err != nil {
		b.Fatal(err)
	}
	for _, h := range []*Host{local, viaMirror, farOrigin} {
		if _, err := h.Sync(ctx, SyncOptions{Fresh: true}); err != nil {
			b.Fatal(err)
		}
	}
	r.SetRTT(80 * time.Millisecond)
	noop := func(h *Host, opt SyncOptions) func(*testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				res, err := h.Sync(ctx, opt)
				if err != nil || !res.UpToDate {
					b.Fatalf("%+v, %v: want up to date", res, err)
				}
			}
		}
	}
	info := func(url string) func(*testing.B) {
		return func(b *testing.B) {
			c := natsjstest.Connect(b, url)
			for b.Loop() {
				if _, err := c.Request("$JS.API.STREAM.INFO."+ledger.StreamName("bench"), nil, 5*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("raw-stream-info/local-origin", info(r.Origin.ClientURL()))
	b.Run("raw-stream-info/mirror", info(r.Mirror.ClientURL()))
	b.Run("noop-sync/local-origin", noop(local, SyncOptions{}))
	b.Run("noop-sync/mirror-80ms", noop(viaMirror, SyncOptions{}))
	b.Run("noop-sync/far-origin-80ms", noop(farOrigin, SyncOptions{}))
	b.Run("locked-pull/local-origin", noop(local, SyncOptions{Fresh: true}))
	b.Run("locked-pull/mirror-80ms", noop(viaMirror, SyncOptions{Fresh: true}))
	commit := func(h *Host) func(*testing.B) {
		return func(b *testing.B) {
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				write(h, i)
				b.StartTimer()
				if _, err := h.Commit(ctx, CommitOptions{Message: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("commit/local-origin", commit(local))
	b.Run("commit/mirror-80ms", commit(viaMirror))
}

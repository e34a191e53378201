package host

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/gcstest"
	"github.com/syncledger/syncledger/internal/s3test"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/blobs"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// ColdSyncEnv asks TestColdSyncEveryStore for the acceptance size of issue 26
// point 11: 100,000 files through every blob store — nats:// (the default of
// `init`), file:// and s3:// (the server at SYNCLEDGER_TEST_S3_ENDPOINT,
// scripts/versitygw.sh: required, never skipped) — and 10,000 through gs://
// (fake-gcs-server, where 100,000 is not cheap).
// .ci/run sets it. ColdSyncFilesEnv overrides the number of files, and
// ColdSyncStoresEnv the stores (comma-separated, of nats, file, gs, s3), for a
// run by hand.
const (
	ColdSyncEnv       = "SYNCLEDGER_TEST_COLDSYNC"
	ColdSyncFilesEnv  = "SYNCLEDGER_TEST_COLDSYNC_FILES"
	ColdSyncStoresEnv = "SYNCLEDGER_TEST_COLDSYNC_STORES"
)

// TestColdSyncEveryStore commits files on one host, cold-syncs them on a second
// and syncs a third lazily, then hydrates every file there (Fetch), through
// each blob store. The NATS object store failed both past ~1,000 objects: every
// read opened a consumer and nats-server caps a stream at 1,000 (issue 26 point
// 11). Without ColdSyncEnv it runs 1,200 files through nats:// only.
func TestColdSyncEveryStore(t *testing.T) {
	files, stores := 1_200, []string{"nats"}
	if os.Getenv(ColdSyncEnv) != "" {
		files, stores = 100_000, []string{"nats", "file", "gs", "s3"}
	} else {
		t.Parallel()
	}
	if v := os.Getenv(ColdSyncFilesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", ColdSyncFilesEnv, v)
		}
		files = n
	}
	if v := os.Getenv(ColdSyncStoresEnv); v != "" {
		stores = strings.Split(v, ",")
		for _, st := range stores {
			if !slices.Contains([]string{"nats", "file", "gs", "s3"}, st) {
				t.Fatalf("%s=%q: %q is not one of nats, file, gs, s3", ColdSyncStoresEnv, v, st)
			}
		}
	}
	for _, store := range stores {
		n := files
		if store == "gs" && os.Getenv(ColdSyncFilesEnv) == "" {
			// fake-gcs-server (memory backend) is not cheap at 100,000: its
			// commit ran for over an hour on 2 loaded CPUs. 10,000 still
			// crosses every per-object limit the others are checked for.
			n = min(n, 10_000)
		}
		t.Run(store, func(t *testing.T) { coldSync(t, store, n) })
	}
}

func coldSync(t *testing.T, store string, files int) {
	ctx := context.Background()
	_, nc := natsjstest.RunServer(t)
	var url string
	switch store {
	case "nats":
		url = "nats://coldsync"
	case "file":
		url = "file://" + t.TempDir()
	case "gs":
		srv := gcstest.Start(t)
		srv.CreateBucket(t, "coldsync")
		t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
		url = "gs://coldsync/blobs"
	case "s3":
		srv, ok := s3test.FromEnv()
		if !ok {
			t.Fatalf("%s asks for s3:// and %s", ColdSyncEnv, s3test.Hint)
		}
		url = fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&path-style=true", srv.Bucket, srv.Prefix(t, "coldsync"), srv.Endpoint, srv.Region)
	}
	objs, err := blobs.Open(ctx, url, blobs.Options{NATS: natsblob.Opener(nc), Retry: ledger.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { objs.Close() })
	lg, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "coldsync", Blobs: url})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nc: nc, log: lg, blobs: objs}
	a, b, c := e.host("a"), e.host("b"), e.host("c")
	const parts = 200
	for i := range files {
		writeFile(t, a, fmt.Sprintf("data/t/m%03d/d/%d/raw", i%parts, i), fmt.Sprint(i))
	}
	start := time.Now()
	res, err := a.Commit(ctx, CommitOptions{Message: "cold"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: commit of %d files: %v", store, files, time.Since(start))
	if res.Written != files {
		t.Fatalf("commit wrote %d files, want %d", res.Written, files)
	}
	head := res.Seqs[len(res.Seqs)-1]

	start = time.Now()
	sr := mustSync(t, b, SyncOptions{})
	t.Logf("%s: cold sync of %d files: %v", store, files, time.Since(start))
	if sr.Written != files || sr.HWM != head {
		t.Fatalf("cold sync: %+v", sr)
	}
	if v, err := b.Verify(ctx); err != nil || !v.OK() || v.Checked != files {
		t.Fatalf("verify after the cold sync: %+v %v", v, err)
	}

	if lr := mustSync(t, c, SyncOptions{Lazy: true}); lr.Written != 0 || lr.HWM != head {
		t.Fatalf("lazy sync: %+v", lr)
	}
	paths := make([]string, files)
	for i := range files {
		paths[i] = fmt.Sprintf("data/t/m%03d/d/%d/raw", i%parts, i)
	}
	start = time.Now()
	fr, err := c.Fetch(ctx, paths)
	if err != nil {
		t.Fatalf("hydrate: %v", err)
	}
	t.Logf("%s: hydration of %d files: %v", store, files, time.Since(start))
	if fr.Written != files {
		t.Fatalf("hydrate wrote %d files, want %d", fr.Written, files)
	}
	if v, err := c.Verify(ctx); err != nil || !v.OK() || v.Checked != files || v.Lazy != 0 {
		t.Fatalf("verify after hydration: %+v %v", v, err)
	}
}

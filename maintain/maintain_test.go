package maintain

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
	"github.com/syncledger/syncledger/projector/snapshot"
)

func newLedger(t *testing.T) (snapshot.Config, string) {
	t.Helper()
	lg, err := memledger.New(ledger.Info{Name: "t", Blobs: "file:///unused"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	objsDrv, err := fileblob.New(fileblob.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	objs := ledger.NewBucket(objsDrv, ledger.RetryPolicy{Attempts: 1})
	return snapshot.Config{Log: lg, Blobs: objs, Objects: objs}, dir
}

// commit stores content and appends a one-file commit to partition "audit".
func commit(t *testing.T, cfg snapshot.Config, path, content string, prev *ledger.Seq, n *uint64) {
	t.Helper()
	ctx := context.Background()
	info, _ := cfg.Log.Info(ctx)
	d, err := ledger.PutBytes(ctx, cfg.Blobs, []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ledger.NewCommitID(rand.Reader)
	*n++
	ev := ledger.Event{V: 1, Ledger: info.UUID, Commit: id, Host: "h", At: time.Now(), Partition: "audit",
		ModelSeq: *n, Prev: *prev, Parts: 1, Part: 1,
		Entries: []ledger.Entry{{Path: path, SHA256: d, Size: int64(len(content)), Mode: 0o644}}}
	seqs, err := cfg.Log.Append(ctx, []ledger.Event{ev})
	if err != nil {
		t.Fatal(err)
	}
	*prev = seqs[0]
}

func TestTakeRetainGC(t *testing.T) {
	ctx := context.Background()
	cfg, dir := newLedger(t)
	if r, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{}); err != nil || !r.UpToDate {
		t.Fatalf("take on an empty ledger: %+v %v", r, err)
	}
	if _, err := Retain(ctx, cfg, 0); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("retain without a snapshot: %v, want ErrNotFound", err)
	}
	var prev ledger.Seq
	var n uint64
	for _, c := range []string{"v1", "v2", "v3"} {
		commit(t, cfg, "audit/x", c, &prev, &n)
	}
	// An upload never published: an orphan.
	orphan, _ := ledger.PutBytes(ctx, cfg.Blobs, []byte("never published"))
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	// Without retention, every event's blobs are kept: only the orphan goes.
	res, err := GC(ctx, cfg, GCOptions{Grace: time.Minute})
	if err != nil || len(res.Deleted) != 1 || res.Deleted[0] != orphan.String() {
		t.Fatalf("gc before retention: %+v %v", res, err)
	}
	r1, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{})
	if err != nil || r1.Info.Seq != 3 || r1.Entries != 1 {
		t.Fatalf("take: %+v %v", r1, err)
	}
	if r, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{}); err != nil || !r.UpToDate {
		t.Fatalf("second take: %+v %v", r, err)
	}
	commit(t, cfg, "audit/x", "v4", &prev, &n)
	r2, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{})
	if err != nil || r2.Base != 3 || r2.Events != 1 || r2.Info.Seq != 4 {
		t.Fatalf("incremental take: %+v %v", r2, err)
	}
	// Margin 1 keeps snapshot 3 usable: events ≤ 3 dropped, except audit's head (4).
	rr, err := Retain(ctx, cfg, 1)
	if err != nil || rr.Before != 4 || rr.Dropped != 3 {
		t.Fatalf("retain: %+v %v", rr, err)
	}
	if _, floor, err := snapshot.Floor(ctx, cfg.Log); err != nil || floor != 4 {
		t.Fatalf("retention bound %d %v", floor, err)
	}
	// v1 and v2 are now referenced by nothing a host can reach; v3 by snapshot 3.
	res, err = GC(ctx, cfg, GCOptions{Grace: time.Minute, DryRun: true})
	if err != nil || len(res.Deleted) != 2 || res.Snapshots != 2 {
		t.Fatalf("gc after retention: %+v %v", res, err)
	}
	// A corrupt newest snapshot: the older one roots the collection and a new
	// snapshot repairs the newest seq.
	cfg.Objects.PutObject(ctx, r2.Info.Key, bytes.NewReader([]byte("x")), 1)
	if r, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{}); err != nil || r.UpToDate || r.Base != 3 || len(r.Skipped) != 1 {
		t.Fatalf("take over a corrupt newest: %+v %v", r, err)
	}
	if _, err := snapshot.Get(ctx, cfg.Objects, r2.Info); err != nil {
		t.Fatalf("newest not repaired: %v", err)
	}
	// Stream-only take once events were dropped: refused.
	if _, err := snapshot.Take(ctx, cfg, snapshot.TakeOptions{Full: true}); !errors.Is(err, ledger.ErrTruncated) {
		t.Fatalf("full take after retention: %v, want ErrTruncated", err)
	}
}

// staleListing is a blob driver whose listing reports every object as stored
// long ago, as a listing taken before a commit stored a blob again would.
type staleListing struct{ driver.Bucket }

func (s staleListing) List(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	return s.Bucket.List(ctx, prefix, func(oi ledger.ObjectInfo) error {
		oi.ModTime = oi.ModTime.Add(-48 * time.Hour)
		return fn(oi)
	})
}

// GC looks at each blob once more before deleting it: one stored again since
// the listing (a commit reusing garbage content) is kept, and counted young;
// one still old is deleted.
func TestGCKeepsBlobStoredAgain(t *testing.T) {
	ctx := context.Background()
	cfg, dir := newLedger(t)
	var prev ledger.Seq
	var n uint64
	commit(t, cfg, "audit/x", "v1", &prev, &n)
	gone, _ := ledger.PutBytes(ctx, cfg.Blobs, []byte("never published, old"))
	again, _ := ledger.PutBytes(ctx, cfg.Blobs, []byte("never published, stored again"))
	old := time.Now().Add(-30 * time.Hour) // past the grace, in the listing and in fact
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(ledger.BlobKey(gone))), old, old); err != nil {
		t.Fatal(err)
	}
	cfg.Blobs = cfg.Objects.View(func(d driver.Bucket) driver.Bucket { return staleListing{d} })
	res, err := GC(ctx, cfg, GCOptions{Grace: 24 * time.Hour, DryRun: true})
	if err != nil || len(res.Deleted) != 2 {
		t.Fatalf("dry run over a stale listing: %+v %v; want both unpublished blobs listed", res, err)
	}
	res, err = GC(ctx, cfg, GCOptions{Grace: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 1 || res.Deleted[0] != gone.String() || res.Young != 1 || res.Bytes != int64(len("never published, old")) {
		t.Fatalf("gc over a stale listing: %+v; want only %s deleted, %s kept as young", res, gone, again)
	}
	if _, err := cfg.Blobs.Stat(ctx, again); err != nil {
		t.Fatalf("blob stored again: %v", err)
	}
	if _, err := cfg.Blobs.Stat(ctx, gone); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("old blob: %v, want deleted", err)
	}
}

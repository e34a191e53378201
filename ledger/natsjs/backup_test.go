package natsjs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestBackupRestore: a backup holds the log (metadata, attestations and
// retention bound included), the object store, the swamp and heartbeat
// buckets; written to since, the ledger is brought back as it was by a
// restore that replaces it, and refused without replace. Each stream is large
// enough to need several chunks each way (the flow control).
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	srv, _ := natsjstest.RunServer(t)
	ctx := testCtx(t)
	c, err := Open(ctx, Config{Write: Endpoint{URL: srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lg := c.Ledger("bk")
	l, err := lg.Create(ctx, LedgerConfig{Blobs: "nats://bkblobs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Upgrade(ctx); err != nil { // the buckets and dead letters, as an admin makes them
		t.Fatal(err)
	}
	if _, err := c.UpgradeObjectStore(ctx, "bkblobs", 1); err != nil {
		t.Fatal(err)
	}
	objs, err := c.ObjectStore(ctx, "bkblobs", 1)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB: several chunks
	put := func(key string, b []byte) {
		t.Helper()
		if err := objs.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	put("before", big)
	for range 50 {
		commitNext(t, l, "a", "b")
	}
	if err := l.AttestSnapshot(ctx, 100, ledger.DigestOf([]byte("snap"))); err != nil {
		t.Fatal(err)
	}
	if err := l.AttestRetention(ctx, 3); err != nil {
		t.Fatal(err)
	}
	swamp, err := lg.SwampKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := swamp.Put(ctx, "lock", []byte("held before")); err != nil {
		t.Fatal(err)
	}
	beats, err := lg.Heartbeats()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := beats.Put(ctx, "host-a", []byte(`{"hwm":100}`)); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "backup")
	b, err := lg.Backup(ctx, dir, BackupOptions{ObjectStore: "bkblobs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Describe(dir); err != nil {
		t.Fatal(err)
	}
	if b.Head != 100 || b.UUID != l.UUID() || b.Blobs != "nats://bkblobs" || b.Attested.Retained != 3 || len(b.Attested.Snapshots) != 1 {
		t.Fatalf("backup = %+v", b)
	}
	roles := []string{}
	for _, s := range b.Streams {
		roles = append(roles, s.Role)
	}
	if diff := cmp.Diff([]string{RoleLog, RoleObjects, RoleSwamp, RoleHeartbeats, RoleDeadLetters}, roles); diff != "" {
		t.Fatalf("streams backed up (-want +got):\n%s", diff)
	}
	if _, err := lg.Backup(ctx, dir, BackupOptions{}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a second backup into the same directory = %v, want refused", err)
	}

	// Written to since: more commits, blobs, keys.
	for range 20 {
		commitNext(t, l, "a")
	}
	put("after", []byte("lost with the restore"))
	if _, err := swamp.Put(ctx, "lock", []byte("held after")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restore(ctx, dir, RestoreOptions{}); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("restore over an existing ledger without replace = %v, want ErrConflict", err)
	}
	if last, _ := l.LastSeq(ctx); last != 120 {
		t.Fatalf("a refused restore touched the log: last seq %d", last)
	}
	// A file of the backup damaged since (one byte of the object store's
	// archive): refused before anything is deleted, even with Replace.
	for _, s := range b.Streams {
		if s.SHA256 == "" || s.Bytes == 0 {
			t.Fatalf("stream %s backed up without its size or digest: %+v", s.Stream, s.StreamSnapshot)
		}
	}
	arc := filepath.Join(dir, b.Streams[1].File)
	good, err := os.ReadFile(arc)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(arc, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restore(ctx, dir, RestoreOptions{Replace: true}); !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("restore of a damaged backup = %v, want ErrChecksum", err)
	}
	if last, _ := l.LastSeq(ctx); last != 120 {
		t.Fatalf("a restore refused for a damaged file touched the log: last seq %d", last)
	}
	if err := os.WriteFile(arc, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restore(ctx, dir, RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}

	rl, err := lg.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := rl.LastSeq(ctx); last != 100 || rl.UUID() != l.UUID() {
		t.Fatalf("restored log: last seq %d, uuid %s", last, rl.UUID())
	}
	if n := len(readAll(t, rl, 1, 0)); n != 100 {
		t.Fatalf("restored log reads %d records, want 100", n)
	}
	att, err := rl.Attested(ctx)
	if err != nil || att.Retained != 3 || len(att.Snapshots) != 1 {
		t.Fatalf("restored attestations = %+v, %v", att, err)
	}
	commitNext(t, rl, "a") // the chains go on from the restored heads
	robjs, err := c.ObjectStore(ctx, "bkblobs", 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := robjs.Get(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, big) {
		t.Fatalf("the restored object store's blob: %d bytes, want %d", len(got), len(big))
	}
	if _, err := robjs.Stat(ctx, "after"); robjs.ErrorCode(err) != driver.NotFound {
		t.Fatalf("a blob stored after the backup, after the restore: %v", err)
	}
	rswamp, err := lg.SwampKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := rswamp.Get(ctx, "lock"); err != nil || string(e.Value) != "held before" {
		t.Fatalf("restored swamp bucket: %q, %v", e.Value, err)
	}
	if _, err := os.Stat(filepath.Join(dir, BackupFile)); err != nil {
		t.Fatal(err)
	}
}

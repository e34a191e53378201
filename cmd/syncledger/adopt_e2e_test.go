package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// A fresh host's rebuild after retention, when the only snapshot is one an
// older release took (stored, not attested), prints the admin's adopt as its
// way out (host.NoSnapshotError, wayout.go); followed as printed, the rebuild
// then works. Without an unattested snapshot it prints no way out: a rebuild
// again would fail the same way.
func TestRebuildAdoptWayOutCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "adopt")
	blobDir := t.TempDir()
	c.ok("init", "--blobs", "file://"+blobDir)
	w, fresh, bare := t.TempDir(), t.TempDir(), t.TempDir()
	hw := []string{"--cache", w, "--host", "writer"}
	put(t, w, "audit/a", "a1")
	c.ok(append(hw, "commit", "-m", "one")...)

	// The snapshot an older release took: stored beside the blobs, unattested.
	var url string
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "SYNCLEDGER_NATS="); ok {
			url = v
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := natsjs.OpenLog(t.Context(), nc, "adopt")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fileblob.New(fileblob.Config{Dir: blobDir})
	if err != nil {
		t.Fatal(err)
	}
	objs := ledger.NewBucket(fs, ledger.RetryPolicy{Attempts: 1})
	s, err := snapshot.Build(t.Context(), snapshot.BuildConfig{Log: l, Blobs: objs})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := snapshot.Encode(&b, s); err != nil {
		t.Fatal(err)
	}

	// Retention drops seq 1 (the partition's head moves on first).
	put(t, w, "audit/a", "a2")
	c.ok(append(hw, "commit", "-m", "two")...)
	if _, err := l.TruncateBefore(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	r := c.run("--cache", bare, "rebuild")
	if r.code != exitRebuild || strings.Contains(r.stderr, "way out:") {
		t.Fatalf("rebuild with no snapshot at all: exit %d, want %d and no way out (a circle):\n%s", r.code, exitRebuild, r.stderr)
	}
	if err := objs.PutObject(t.Context(), snapshot.Key(l.UUID(), s.Seq), bytes.NewReader(b.Bytes()), int64(b.Len())); err != nil {
		t.Fatal(err)
	}

	hf := []string{"--cache", fresh, "--host", "fresh"}
	r = c.run(append(hf, "rebuild")...)
	if r.code != exitRebuild || !strings.Contains(r.stderr, "way out: syncledger snapshot --adopt") {
		t.Fatalf("rebuild with an unattested snapshot: exit %d, want %d and the adopt way out:\n%s", r.code, exitRebuild, r.stderr)
	}
	trail := c.followWayOuts(hf, 4, "rebuild")
	t.Logf("converged: %s", strings.Join(trail, " → "))
	if got, want := tree(t, fresh), tree(t, w); !cmp.Equal(got, want) {
		t.Fatalf("fresh host after the way out: %v, want %v", got, want)
	}
}

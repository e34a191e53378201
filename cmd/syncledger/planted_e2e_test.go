package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// TestPlantedSnapshotNeverAdoptedCLI is issue 38's point 8 from the
// attacker's side: on a ledger that attests its snapshots, any host of its
// shared file:// store plants a snapshot of the log's state less one file, and
// spoils the attested one. A fresh host's rebuild fails without printing
// `snapshot --adopt` as its way out; the admin's adopt, run anyway, does not
// attest the planted snapshot; and no host ends up without the file while
// reporting itself up to date.
func TestPlantedSnapshotNeverAdoptedCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "planted")
	blobDir := t.TempDir()
	c.ok("init", "--blobs", "file://"+blobDir)
	w, fresh := t.TempDir(), t.TempDir()
	hw := []string{"--cache", w, "--host", "writer"}
	const keep = "data/t/m/keep/1/raw"
	put(t, w, "audit/a", "a1")
	put(t, w, keep, "precious")
	c.ok(append(hw, "commit", "-m", "one")...)
	c.ok("snapshot") // the ledger attests from here on
	put(t, w, "audit/a", "a2")
	c.ok(append(hw, "commit", "-m", "two")...)
	c.ok("snapshot", "--retain-margin", "0")
	put(t, w, "audit/a", "a3")
	c.ok(append(hw, "commit", "-m", "three")...)

	// The attacker: a host of the shared store.
	url := strings.TrimPrefix(c.env[slices.IndexFunc(c.env, func(kv string) bool { return strings.HasPrefix(kv, "SYNCLEDGER_NATS=") })], "SYNCLEDGER_NATS=")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := t.Context()
	l, err := natsjs.OpenLog(ctx, nc, "planted")
	if err != nil {
		t.Fatal(err)
	}
	objsDrv, err := fileblob.New(fileblob.Config{Dir: blobDir})
	if err != nil {
		t.Fatal(err)
	}
	objs := ledger.NewBucket(objsDrv, ledger.RetryPolicy{Attempts: 1})
	base, attested, err := snapshot.Select(ctx, l, objs, l.UUID(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	planted, err := snapshot.Build(ctx, snapshot.BuildConfig{Log: l, Blobs: objs, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(planted.Entries, func(e snapshot.Entry) bool { return e.Path == keep })
	planted.Entries = slices.Delete(planted.Entries, i, i+1)
	var b bytes.Buffer
	if err := snapshot.Encode(&b, planted); err != nil {
		t.Fatal(err)
	}
	if err := objs.PutObject(ctx, snapshot.Key(l.UUID(), planted.Seq), &b, int64(b.Len())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blobDir, filepath.FromSlash(attested.Key)), []byte("spoiled"), 0o644); err != nil {
		t.Fatal(err)
	}

	hf := []string{"--cache", fresh, "--host", "fresh"}
	r := c.run(append(hf, "rebuild")...)
	if r.code != exitRebuild || strings.Contains(r.stderr, "snapshot --adopt") {
		t.Fatalf("rebuild beside a planted snapshot on a ledger that attests: exit %d, want %d and no adopt way out:\n%s", r.code, exitRebuild, r.stderr)
	}
	out := c.ok("snapshot", "--list")
	if !strings.Contains(out, snapshot.Key(l.UUID(), planted.Seq)) || !strings.Contains(out, "not taken by syncledger snapshot") {
		t.Errorf("snapshot --list does not mark the planted snapshot:\n%s", out)
	}
	out = c.ok("snapshot", "--adopt")
	if strings.Contains(out, "attested snapshot at seq") {
		t.Errorf("snapshot --adopt attested something beside a planted snapshot:\n%s", out)
	}
	if a, err := l.Attested(ctx); err != nil || a.Snapshots[planted.Seq] != (ledger.Digest{}) {
		t.Fatalf("the planted snapshot at seq %d is attested (%v)", planted.Seq, err)
	}
	// No host holds the ledger without the file while saying it is up to date.
	if r := c.run(append(hf, "rebuild")...); r.code == 0 {
		if got := tree(t, fresh)[keep]; got != "precious" {
			t.Fatalf("a rebuilt host reports itself up to date without %s (%q)", keep, got)
		}
	}
}

// TestPlantedRetentionBoundCLI is issue 38's point 7 from the attacker's
// side: a host credential writes snapshots/<uuid>/retention.json into the
// ledger's NATS object store, far above the head. snapshot --list shows it;
// the admin's adopt does not attest it; snapshot and rebuild keep working. A
// bound an older release's adopt did attest far above the head wedges
// nothing, and the admin's documented correction, snapshot --retention-bound,
// removes it; a correction the log contradicts, or a host's, is refused.
func TestPlantedRetentionBoundCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	users := writeFile(t, filepath.Join(dir, "users.yaml"), "users:\n  - {user: ops, password: ops-pw, role: admin}\n"+
		"  - {user: web, password: web-pw, role: host}\n")
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users), "--listen", "127.0.0.1:0",
		"--data", filepath.Join(dir, "data"), "--blobs", "nats://syncledger-default")
	defer srv.stop(t, syscall.SIGTERM)
	env := func(extra ...string) []string {
		return cliEnv(append([]string{"SYNCLEDGER_NATS=" + info.URL}, extra...)...)
	}
	web := env("NATS_USER=web", "NATS_PASSWORD=web-pw", "SYNCLEDGER_HOST=web-1")
	admin := env("NATS_USER=ops", "NATS_PASSWORD=ops-pw")
	w := filepath.Join(dir, "w")
	for i := range 3 {
		put(t, w, "audit/a", fmt.Sprint("a", i))
		put(t, w, fmt.Sprintf("data/t/m/%d/1/raw", i), "x")
		if r := cli(t, web, "--cache", w, "commit", "-m", fmt.Sprint(i)); r.code != 0 {
			t.Fatalf("commit: %+v", r)
		}
	}

	// The attacker: the host credential, putting an object as it puts blobs
	// (the bucket refuses roll-ups, so not through nats.go's object store).
	nc, err := nats.Connect(info.URL, nats.UserInfo("web", "web-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := t.Context()
	objDrv, err := natsblob.New(ctx, natsblob.Config{Conn: nc, Bucket: "syncledger-default"})
	if err != nil {
		t.Fatal(err)
	}
	obj := ledger.NewBucket(objDrv, ledger.RetryPolicy{Attempts: 1})
	key := snapshot.Prefix + info.UUID + "/retention.json"
	planted := fmt.Appendf(nil, `{"v":1,"ledger":%q,"before":%d}`, info.UUID, uint64(1)<<40)
	if err := obj.PutObject(ctx, key, bytes.NewReader(planted), int64(len(planted))); err != nil {
		t.Fatalf("the host plants retention.json: %v", err)
	}

	list := func() string {
		t.Helper()
		r := cli(t, admin, "snapshot", "--list")
		if r.code != 0 {
			t.Fatalf("snapshot --list: %+v", r)
		}
		return r.stdout
	}
	if out := list(); !strings.Contains(out, key) {
		t.Errorf("snapshot --list does not show %s:\n%s", key, out)
	}
	r := cli(t, admin, "snapshot", "--adopt", "--json")
	var res struct {
		Retained uint64 `json:"retained"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || res.Retained != 0 || !strings.Contains(r.stdout, "above the log's head") {
		t.Fatalf("snapshot --adopt beside a planted bound: exit %d, %v, %+v\n%s", r.code, err, res, r.stderr)
	}
	fresh := filepath.Join(dir, "fresh")
	for _, args := range [][]string{{"snapshot"}, {"--cache", fresh, "rebuild"}} {
		if r := cli(t, admin, args...); r.code != 0 {
			t.Fatalf("%v after the planted bound: exit %d\n%s", args, r.code, r.stderr)
		}
	}

	// What an older release's adopt left: the bound attested in the stream.
	anc, err := nats.Connect(info.URL, nats.UserInfo("ops", "ops-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer anc.Close()
	l, err := natsjs.OpenLog(ctx, anc, "default")
	if err != nil {
		t.Fatal(err)
	}
	head, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AttestRetention(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	if out := list(); !strings.Contains(out, "above its head: ignored") {
		t.Errorf("snapshot --list does not flag the bound above the head:\n%s", out)
	}
	put(t, w, "audit/a", "after")
	if r := cli(t, web, "--cache", w, "commit", "-m", "after"); r.code != 0 {
		t.Fatalf("commit: %+v", r)
	}
	if r := cli(t, admin, "snapshot"); r.code != 0 {
		t.Fatalf("snapshot under a bound above the head: exit %d\n%s", r.code, r.stderr)
	}
	// A wrong bound within the log (nothing was dropped): correct it.
	if r := cli(t, admin, "snapshot", "--retention-bound", fmt.Sprint(head+100)); r.code == 0 || !strings.Contains(r.stderr, "above the log's head") {
		t.Errorf("--retention-bound above the head: exit %d\n%s", r.code, r.stderr)
	}
	if r := cli(t, admin, "snapshot", "--retention-bound", "0"); r.code != 0 {
		t.Fatalf("--retention-bound 0: exit %d\n%s", r.code, r.stderr)
	}
	if a, err := l.Attested(ctx); err != nil || a.Retained != 0 {
		t.Errorf("after --retention-bound 0: bound %d, %v", a.Retained, err)
	}
	// Only the admin corrects it.
	if r := cli(t, web, "snapshot", "--retention-bound", "1"); r.code == 0 || !strings.Contains(r.stderr, "permission") {
		t.Errorf("a host's --retention-bound: exit %d\n%s", r.code, r.stderr)
	}
	if r := cli(t, admin, "--cache", filepath.Join(dir, "fresh2"), "rebuild"); r.code != 0 {
		t.Fatalf("rebuild after the correction: exit %d\n%s", r.code, r.stderr)
	}
}

// TestWrongRetentionBoundWayOutCLI: a retention bound an older release's adopt
// attested while the log still holds every event below it (what a planted
// retention.json became) made every snapshot and every fresh rebuild fail for
// good, with `syncledger rebuild` as the way out. Now both print the admin's
// correction, and followed as printed, they converge.
func TestWrongRetentionBoundWayOutCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "wrongbound")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	w := t.TempDir()
	hw := []string{"--cache", w, "--host", "writer"}
	for i := range 3 {
		put(t, w, "audit/a", fmt.Sprint("a", i))
		c.ok(append(hw, "commit", "-m", fmt.Sprint(i))...)
	}
	c.ok("snapshot")
	put(t, w, "audit/a", "a3")
	c.ok(append(hw, "commit", "-m", "3")...)
	url := strings.TrimPrefix(c.env[slices.IndexFunc(c.env, func(kv string) bool { return strings.HasPrefix(kv, "SYNCLEDGER_NATS=") })], "SYNCLEDGER_NATS=")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l, err := natsjs.OpenLog(t.Context(), nc, "wrongbound")
	if err != nil {
		t.Fatal(err)
	}
	head, _ := l.LastSeq(t.Context())
	if err := l.AttestRetention(t.Context(), head+1); err != nil { // nothing was dropped
		t.Fatal(err)
	}
	put(t, w, "audit/a", "a4")
	c.ok(append(hw, "commit", "-m", "4")...)
	r := c.run("snapshot")
	if r.code == 0 || !strings.Contains(r.stderr, "way out: syncledger snapshot --retention-bound 0") {
		t.Fatalf("snapshot under a wrong bound: exit %d\n%s", r.code, r.stderr)
	}
	fresh := t.TempDir()
	hf := []string{"--cache", fresh, "--host", "fresh"}
	r = c.run(append(hf, "rebuild")...)
	if r.code == 0 || !strings.Contains(r.stderr, "way out: syncledger snapshot --retention-bound 0") {
		t.Fatalf("rebuild under a wrong bound: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("converged: %s", strings.Join(c.followWayOuts(hf, 4, "rebuild"), " → "))
	if got, want := tree(t, fresh), tree(t, w); !cmp.Equal(got, want) {
		t.Fatalf("fresh host after the way out: %v, want %v", got, want)
	}
	c.ok("snapshot")
}

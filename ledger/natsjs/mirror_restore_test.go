package natsjs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// waitMirrorCommits waits until the mirror holds seq, then returns its
// commit ids at seqs 1 to seq (read from the mirror alone).
func (g *region) mirrorCommits(t *testing.T, seq ledger.Seq) map[ledger.Seq]string {
	t.Helper()
	g.waitMirror(t, seq)
	out := map[ledger.Seq]string{}
	for s := ledger.Seq(1); s <= seq; s++ {
		c, err := g.log.d.rep.m.CommitAt(testCtx(t), s)
		if err != nil {
			t.Fatalf("the mirror's commit at seq %d: %v", s, err)
		}
		out[s] = c
	}
	return out
}

// commitsOf returns l's commit ids at seqs 1 to seq.
func commitsOf(t *testing.T, l *Log, seq ledger.Seq) map[ledger.Seq]string {
	t.Helper()
	out := map[ledger.Seq]string{}
	for s := ledger.Seq(1); s <= seq; s++ {
		c, err := l.CommitAt(testCtx(t), s)
		if err != nil {
			t.Fatalf("commit at seq %d: %v", s, err)
		}
		out[s] = c
	}
	return out
}

// mirrorRestoreEnv gates TestMirrorAfterRestore, an observation of the
// server's own behaviour that waits for it: when set, the test must run.
const mirrorRestoreEnv = "SYNCLEDGER_TEST_MIRROR_RESTORE"

// TestMirrorAfterRestore is what a mirror does when its origin's stream is
// deleted and restored from an older backup (issue 39: restore recreates
// mirrors), and what RecreateMirror makes of it.
//
// What the server does (nats-server 2.15): the mirror keeps every message it
// copied — the commits the restore rewound, at their old seqs — and says
// nothing (no error, lag 0); once its source consumer is made again (about
// 10 s later) it copies the new history only past its own last seq. A host
// reading through it would find, at a mark in the lost history, the commit it
// applied there, and believe it up to date. So the mirror must be made anew:
// mirror create records it in the origin's stream (the backup carries the
// record), and RecreateMirror, reached from the origin through the mirror's
// domain, deletes it and makes it again: it then copies the restored history
// from seq 1. A domain out of reach is told as ledger.ErrUnreachable, at once.
func TestMirrorAfterRestore(t *testing.T) {
	if os.Getenv(mirrorRestoreEnv) == "" {
		t.Skipf("set %s=1 to run: it waits (~25 s) for the server to make a restored origin's mirror copy again; .ci/run's two-region section sets it and requires the pass", mirrorRestoreEnv)
	}
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	admin, err := Open(ctx, Config{Write: Endpoint{URL: g.r.Origin.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	want := MirrorRecord{Domain: natsjstest.MirrorDomain, URL: g.r.Mirror.ClientURL(), Replicas: 1}
	if ms, err := g.origin.Mirrors(ctx); err != nil || len(ms) != 1 || ms[0] != want {
		t.Fatalf("the origin's mirror records = %+v, %v; want [%+v]", ms, err, want)
	}
	for range 5 {
		commitNext(t, g.origin, "a")
	}
	dir := filepath.Join(t.TempDir(), "backup")
	b, err := admin.Ledger("test").Backup(ctx, dir, BackupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Describe(dir); err != nil {
		t.Fatal(err)
	}
	if len(b.Mirrors) != 1 || b.Mirrors[0] != want {
		t.Fatalf("the backup's mirrors = %+v; want [%+v]", b.Mirrors, want)
	}
	for range 5 {
		commitNext(t, g.origin, "a")
	}
	lost := g.mirrorCommits(t, 10)

	// The restore alone: the mirror keeps the lost history.
	if _, err := admin.Restore(ctx, dir, RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	restored, err := admin.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		commitNext(t, restored, "a")
	}
	now := commitsOf(t, restored, 12)
	stale := g.mirrorCommits(t, 12)
	for s := ledger.Seq(6); s <= 12; s++ {
		switch {
		case s <= 10 && (stale[s] != lost[s] || stale[s] == now[s]):
			t.Fatalf("seq %d: the mirror holds %s, the lost history %s, the restored origin %s: want the lost one (what the server did when this was written)", s, stale[s], lost[s], now[s])
		case s > 10 && stale[s] != now[s]:
			t.Fatalf("seq %d: the mirror holds %s, the restored origin %s", s, stale[s], now[s])
		}
	}
	if ms, err := restored.Mirrors(ctx); err != nil || len(ms) != 1 || ms[0] != want {
		t.Fatalf("the restored origin's mirror records = %+v, %v", ms, err)
	}

	// Made anew from the origin: the restored history, from seq 1.
	res, err := admin.RecreateMirror(ctx, "test", want)
	if err != nil || !res.Created || res.Domain != natsjstest.MirrorDomain {
		t.Fatalf("RecreateMirror = %+v, %v", res, err)
	}
	host, err := g.host.Ledger("test").Log(ctx) // a new process of region B
	if err != nil {
		t.Fatal(err)
	}
	g.log = host
	got := g.mirrorCommits(t, 12)
	for s := ledger.Seq(1); s <= 12; s++ {
		if got[s] != now[s] {
			t.Fatalf("seq %d: the recreated mirror holds %s, the origin %s", s, got[s], now[s])
		}
	}

	// The mirror's domain out of reach (the leaf node cut): told at once.
	g.r.Link.SetRefusing(true)
	g.r.Link.DropAll()
	defer g.r.Link.SetRefusing(false)
	start := time.Now()
	err = admin.DeleteMirror(ctx, "test", want)
	if !errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("DeleteMirror with the leaf node cut = %v, want ErrUnreachable", err)
	}
	if _, err := admin.RecreateMirror(ctx, "test", want); !errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("RecreateMirror with the leaf node cut = %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 2*DefaultTimeout+time.Second {
		t.Fatalf("telling the domain out of reach took %v", d)
	}
}

// TestStaleMirror: a mirror restore could not make anew (its mark is not
// the origin's restore mark) is found stale by the host's check of the
// origin: from then on every read goes to the origin — the commit at a seq
// the restore rewound is the restored history's, not the one the mirror
// keeps — and a commit through it is refused with the way out (mirror create
// --replace). mirror create, run again, makes it anew on its own (a stale
// mirror is never "there, as wanted"), and the host reads from it again.
func TestStaleMirror(t *testing.T) {
	t.Parallel()
	g := newRegion(t)
	ctx := testCtx(t)
	admin, err := Open(ctx, Config{Write: Endpoint{URL: g.r.Origin.ClientURL()}, Read: Endpoint{URL: g.r.Mirror.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	commitNext(t, g.origin, "a")
	dir := filepath.Join(t.TempDir(), "backup")
	b, err := admin.Ledger("test").Backup(ctx, dir, BackupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Describe(dir); err != nil {
		t.Fatal(err)
	}
	commitNext(t, g.origin, "a")
	lost := g.mirrorCommits(t, 2)
	if _, err := admin.Restore(ctx, dir, RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	oadmin, err := Open(ctx, Config{Write: Endpoint{URL: g.r.Origin.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer oadmin.Close()
	restored, err := oadmin.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.MarkRestored(ctx, "2026-12-07T00:00:00Z (backup of seq 1)"); err != nil {
		t.Fatal(err)
	}
	commitNext(t, restored, "a")
	now := commitsOf(t, restored, 2)
	if now[2] == lost[2] {
		t.Fatal("the restored history has the lost commit at seq 2")
	}

	l, err := g.host.Ledger("test").Log(ctx) // a region-B process
	if err != nil {
		t.Fatal(err)
	}
	<-l.d.rep.checked
	var se *StaleMirrorError
	if err := l.d.rep.checkErr(); !errors.As(err, &se) || se.OriginMark != "2026-12-07T00:00:00Z (backup of seq 1)" || se.MirrorMark != "" {
		t.Fatalf("the origin's check of a mirror made before the restore = %v; want a StaleMirrorError", err)
	}
	if c, err := l.CommitAt(ctx, 2); err != nil || c != now[2] {
		t.Fatalf("CommitAt(2) through the stale mirror = %s, %v; want the origin's %s (the mirror keeps the lost %s)", c, err, now[2], lost[2])
	}
	if rs := readAll(t, l, 1, 0); len(rs) != 2 || rs[1].Event.Commit != now[2] {
		t.Fatalf("Read through the stale mirror: %+v", rs)
	}
	if _, err := l.Append(ctx, mkCommit(t, l, next(t, l, "a"))); !errors.As(err, &se) || !strings.Contains(err.Error(), "mirror create --replace") {
		t.Fatalf("Append through the stale mirror = %v; want a StaleMirrorError naming mirror create --replace", err)
	}

	res, err := admin.CreateMirror(ctx, "test", 1)
	if err != nil || !res.Replaced || !res.Created {
		t.Fatalf("mirror create of a stale mirror = %+v, %v; want it made anew", res, err)
	}
	l2, err := g.host.Ledger("test").Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-l2.d.rep.checked
	if err := l2.d.rep.checkErr(); err != nil {
		t.Fatalf("the origin's check of the mirror made anew: %v", err)
	}
	g.log = l2
	if got := g.mirrorCommits(t, 2); got[1] != now[1] || got[2] != now[2] {
		t.Fatalf("the mirror made anew holds %v, the origin %v", got, now)
	}
	commitNext(t, l2, "a")
}

// TestWithoutUserinfo: a mirror's recorded URL carries no credentials, every
// role reads the origin's metadata.
func TestWithoutUserinfo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nats://eu:4222":                        "nats://eu:4222",
		"nats://tok@eu:4222":                    "nats://eu:4222",
		"tls://user:p@ss@eu:4222,nats://b:4222": "tls://eu:4222,nats://b:4222",
		"user:pass@eu:4222":                     "eu:4222",
		"eu:4222":                               "eu:4222",
		"nats://eu:4222/x@y":                    "nats://eu:4222/x@y",
	} {
		if got := withoutUserinfo(in); got != want {
			t.Errorf("withoutUserinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

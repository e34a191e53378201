package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// regionsCLI is a ledger on the origin of two regions (natsjstest.RunRegions)
// with its mirror made by the admin's `mirror create`: origin runs commands
// in the origin's region (--nats the origin), b in region B (--nats the
// origin through the far link, --read-nats the mirror's server).
type regionsCLI struct {
	r         *natsjstest.Regions
	origin, b *shell
}

func newRegionsCLI(t *testing.T, name string) *regionsCLI {
	t.Helper()
	r := natsjstest.RunRegions(t)
	c := &regionsCLI{r: r,
		origin: &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+r.Origin.ClientURL(), "SYNCLEDGER_LEDGER="+name, "SYNCLEDGER_LOG_LEVEL=warn")},
		b:      &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+r.FarURL(), "SYNCLEDGER_READ_NATS="+r.Mirror.ClientURL(), "SYNCLEDGER_LEDGER="+name, "SYNCLEDGER_LOG_LEVEL=warn")},
	}
	c.origin.ok("init", "--blobs", "file://"+t.TempDir())
	return c
}

// mirrorStatus is `mirror status --json`.
type mirrorStatus struct {
	Mirror struct {
		Seq               uint64 `json:"seq"`
		Mirror            string `json:"mirror"`
		OriginUnreachable bool   `json:"originUnreachable"`
	} `json:"mirror"`
	Origin *struct {
		Seq uint64 `json:"seq"`
	} `json:"origin"`
	Behind      uint64 `json:"behind"`
	OriginError string `json:"originError"`
}

// caughtUp waits until `mirror status` says the mirror holds seq.
func (c *regionsCLI) caughtUp(seq uint64) {
	c.b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st mirrorStatus
		decodeJSON(c.b.t, "mirror status", c.b.ok("mirror", "status", "--json"), &st)
		if st.Mirror.Seq >= seq && st.Origin != nil && st.Behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.b.t.Fatalf("the mirror did not reach seq %d: %+v", seq, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRegionsCLI: the admin makes the mirror with one command (and running
// it again changes nothing; without --read-nats, or on the origin's own
// domain, it refuses with the reason); a host of region B, configured by
// one setting more (SYNCLEDGER_READ_NATS), syncs from the mirror and says
// so, commits to the origin and sees its commit at once though the link
// between the regions is stalled; with the origin out of reach its syncs go
// on from the mirror, saying the origin is unreachable, and its commit is
// refused with the way out, its file kept.
func TestRegionsCLI(t *testing.T) {
	t.Parallel()
	c := newRegionsCLI(t, "regions")
	// Without a read endpoint, or with one in the origin's domain: refused.
	if r := c.origin.run("mirror", "create"); r.code == 0 || !strings.Contains(r.stderr, "--read-nats") {
		t.Fatalf("mirror create without --read-nats: %+v", r)
	}
	if r := c.origin.runEnv([]string{"SYNCLEDGER_READ_NATS=" + c.r.Origin.ClientURL()}, "mirror", "create"); r.code == 0 || !strings.Contains(r.stderr, "domain") {
		t.Fatalf("mirror create in the origin's domain: %+v", r)
	}
	var made struct {
		Created bool   `json:"created"`
		Stream  string `json:"stream"`
		Domain  string `json:"domain"`
	}
	admin := []string{"SYNCLEDGER_READ_NATS=" + c.r.Mirror.ClientURL()}
	decodeJSON(t, "mirror create", c.origin.runEnv(admin, "mirror", "create", "--json").stdout, &made)
	if !made.Created || made.Domain != natsjstest.MirrorDomain || made.Stream != "SYNCLEDGER_regions" {
		t.Fatalf("mirror create: %+v", made)
	}
	if out := c.origin.runEnv(admin, "mirror", "create").stdout; !strings.Contains(out, "is there") {
		t.Fatalf("mirror create again: %q", out)
	}

	a, b := t.TempDir(), t.TempDir()
	put(t, a, "data/m/1", "one")
	c.origin.ok("--cache", a, "--host", "a", "commit", "-m", "one")
	c.caughtUp(1)
	if out := c.b.ok("--cache", b, "--host", "b", "sync"); !strings.Contains(out, "head from seq 1 (mirror SYNCLEDGER_regions in domain eu") {
		t.Fatalf("region B's sync does not say its head is the mirror's:\n%s", out)
	}
	if got := tree(t, b)["data/m/1"]; got != "one" {
		t.Fatalf("region B's data/m/1 = %q", got)
	}
	if out := c.b.ok("--cache", b, "--host", "b", "status"); !strings.Contains(out, "head from") || !strings.Contains(out, "mirror SYNCLEDGER_regions") {
		t.Fatalf("region B's status does not say where its head came from:\n%s", out)
	}

	// The link between the regions stalls: the mirror holds nothing new.
	// Region B's commit goes to the origin and is its own at once.
	c.r.Link.Stall(true, true)
	put(t, b, "data/m/2", "two")
	c.b.ok("--cache", b, "--host", "b", "commit", "-m", "two")
	if st := c.b.status(b); st.HWM != 2 || len(st.Dirty) != 0 {
		t.Fatalf("region B's status after its commit behind a stalled mirror: %+v", st)
	}
	if out := c.b.ok("--cache", b, "--host", "b", "sync"); !strings.HasPrefix(out, "up to date (hwm 2") {
		t.Fatalf("region B's sync after its commit behind a stalled mirror:\n%s", out)
	}
	c.origin.ok("--cache", a, "--host", "a", "sync")
	if got := tree(t, a)["data/m/2"]; got != "two" {
		t.Fatalf("the origin's host did not pull region B's commit: %q", got)
	}
	c.r.Link.Resume()
	c.caughtUp(2)

	// The origin is lost to region B: reads go on, commits are refused.
	c.r.Far.SetRefusing(true)
	c.r.Far.DropAll()
	var st mirrorStatus
	decodeJSON(t, "mirror status", c.b.ok("mirror", "status", "--json"), &st)
	if st.Origin != nil || st.OriginError == "" || st.Mirror.Seq != 2 {
		t.Fatalf("mirror status with the origin out of reach: %+v", st)
	}
	if out := c.b.ok("--cache", b, "--host", "b", "status"); !strings.Contains(out, "origin unreachable") {
		t.Fatalf("region B's status with the origin out of reach does not say so:\n%s", out)
	}
	put(t, b, "data/m/3", "three")
	r := c.b.run("--cache", b, "--host", "b", "commit", "-m", "three")
	if r.code == 0 || !strings.Contains(r.stderr, "the origin is unreachable") || !strings.Contains(r.stderr, "reads go on from the mirror") {
		t.Fatalf("region B's commit with the origin out of reach: %+v", r)
	}
	if got := tree(t, b)["data/m/3"]; got != "three" {
		t.Fatalf("the refused commit's file: %q", got)
	}
	if st := c.b.status(b); len(st.Dirty) != 1 || st.HWM != 2 {
		t.Fatalf("region B's status after the refused commit: %+v", st)
	}
}

// TestSeedScenarioRegionsCLI is TestSeedScenarioCLI (swamp-club#3193) with the
// control host in region B, reading through the mirror: a scoped sync and a
// no-op commit leave hwm < head — the head the origin says, not the
// mirror's —; with the link between the regions stalled after another run,
// status still counts it as behind (the origin's word); a full sync once the
// mirror caught up pulls the other model and hwm == head.
func TestSeedScenarioRegionsCLI(t *testing.T) {
	t.Parallel()
	c := newRegionsCLI(t, "seed")
	if r := c.origin.runEnv([]string{"SYNCLEDGER_READ_NATS=" + c.r.Mirror.ClientURL()}, "mirror", "create"); r.code != 0 {
		t.Fatalf("mirror create: %+v", r)
	}
	control, writer := t.TempDir(), t.TempDir()
	hc := []string{"--cache", control, "--host", "control"}
	hw := []string{"--cache", writer, "--host", "writer"}
	c.b.ok(append(hc, "sync")...)
	put(t, writer, "data/command/shell/vpc/result/1/raw", "vpc-id: vpc-0abc")
	c.origin.ok(append(hw, "commit", "-m", "model method run vpc execute")...)
	put(t, writer, "data/command/shell/consumer/result/1/raw", "consumed vpc-0abc")
	c.origin.ok(append(hw, "commit", "-m", "model method run consumer execute")...)
	c.caughtUp(2)

	out := c.b.ok(append(hc, "sync", "--model", "command/shell:consumer")...)
	if !strings.Contains(out, "data/command/shell/consumer/result/1/raw") {
		t.Fatalf("scoped sync through the mirror did not pull the consumer:\n%s", out)
	}
	if out := c.b.ok(append(hc, "commit")...); !strings.Contains(out, "nothing to commit") {
		t.Fatalf("no-op commit: %s", out)
	}
	st := c.b.status(control)
	if st.HWM >= st.Head {
		t.Fatalf("hwm %d, head %d: region B's control claims commits it never read (#3193)", st.HWM, st.Head)
	}
	// Another run reaches the origin only.
	c.r.Link.Stall(true, true)
	put(t, writer, "data/command/shell/consumer/result/2/raw", "second run")
	c.origin.ok(append(hw, "commit", "-m", "model method run consumer execute")...)
	if st := c.b.status(control); st.Head != 3 || st.Behind != 3-st.HWM {
		t.Fatalf("region B's status behind a stalled mirror: %+v; want the origin's head 3", st)
	}
	c.r.Link.Resume()
	c.caughtUp(3)
	out = c.b.ok(append(hc, "sync")...)
	if !strings.Contains(out, "data/command/shell/vpc/result/1/raw") {
		t.Fatalf("full sync did not pull vpc:\n%s", out)
	}
	if st := c.b.status(control); st.HWM != st.Head || st.Behind != 0 {
		t.Fatalf("after a full sync: hwm %d, head %d", st.HWM, st.Head)
	}
	c.origin.ok(append(hw, "sync")...)
	if got, want := tree(t, control), tree(t, writer); len(got) != len(want) {
		t.Fatalf("caches differ: control %v, writer %v", got, want)
	}
	for p, v := range tree(t, writer) {
		if tree(t, control)[p] != v {
			t.Fatalf("%s: control %q, writer %q", p, tree(t, control)[p], v)
		}
	}
}

// TestMirrorNotOriginCLI: --nats names the mirror's server instead of the
// origin's (a region B admin's slip). Every command that would act on the
// ledger there — backup, restore of a real backup (with --replace too),
// upgrade, init, a host's sync and commit — is refused with what the stream
// is and the way out (the origin's region; promote only if it is lost), not
// "run syncledger upgrade"; and the mirror is left as it was: it goes on
// copying the origin, and region B's host syncs through it.
func TestMirrorNotOriginCLI(t *testing.T) {
	t.Parallel()
	c := newRegionsCLI(t, "notorigin")
	c.origin.runEnv([]string{"SYNCLEDGER_READ_NATS=" + c.r.Mirror.ClientURL()}, "mirror", "create")
	bak := filepath.Join(t.TempDir(), "backup")
	c.origin.ok("backup", bak)
	slip := &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+c.r.Mirror.ClientURL(), "SYNCLEDGER_LEDGER=notorigin", "SYNCLEDGER_LOG_LEVEL=warn")}
	cache := t.TempDir()
	put(t, cache, "data/m/1", "kept")
	for _, args := range [][]string{
		{"backup", filepath.Join(t.TempDir(), "b")},
		{"restore", bak},
		{"restore", bak, "--replace", "--keep", filepath.Join(t.TempDir(), "kept")},
		{"upgrade"},
		{"init", "--blobs", "file://" + t.TempDir()},
		{"--cache", cache, "--host", "b", "sync"},
		{"--cache", cache, "--host", "b", "commit", "-m", "on the mirror"},
	} {
		r := slip.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, `is a mirror of ledger "notorigin", not the ledger`) ||
			!strings.Contains(r.stderr, "(domain hub)") || strings.Contains(r.stderr, "syncledger upgrade") {
			t.Errorf("%v with --nats the mirror's server: %+v", args, r)
		}
	}
	if got := tree(t, cache)["data/m/1"]; got != "kept" {
		t.Fatalf("the refused commit's file: %q", got)
	}
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "data/m/2", "after")
	c.origin.ok("--cache", a, "--host", "a", "commit", "-m", "after")
	c.caughtUp(1)
	if out := c.b.ok("--cache", b, "--host", "b", "sync"); !strings.Contains(out, "mirror SYNCLEDGER_notorigin in domain eu") || tree(t, b)["data/m/2"] != "after" {
		t.Fatalf("region B's sync through the mirror after the refusals:\n%s", out)
	}
}

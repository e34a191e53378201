//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/lazyfs"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/projector/statedb"
)

// PowerLossEnv turns the power-loss tests on; PowerLossCutsEnv (or
// -powerloss.cuts) sets how many cuts TestPowerLoss makes.
const (
	PowerLossEnv     = "SYNCLEDGER_TEST_POWERLOSS"
	PowerLossCutsEnv = "SYNCLEDGER_TEST_POWERLOSS_CUTS"
)

var powerLossCuts = flag.Int("powerloss.cuts", 0, "cuts TestPowerLoss makes (0: $"+PowerLossCutsEnv+", else 40)")

// TestPowerLoss runs real syncledger processes — commit on the user's host A,
// watch on host B, sync and rebuild on host C, the audit consumer — on a
// lazyfs mount, and cuts the power at random points: every process is killed
// (kill -9) and every write not fsynced is dropped. After each cut it checks,
// from what the mount then holds:
//
//   - no host's state claims content its file does not have (the file holds
//     the row's content, or what an interrupted apply journalled, or — on A —
//     a version the user wrote after it);
//   - nothing acknowledged is lost: a host's HWM and marks are at least what
//     its last completed command reported (a commit's seqs included);
//   - nothing is published that the user did not write: every event's entry
//     is a version the user wrote at that path, later than the one published
//     before it;
//
// and every few cuts, with the power on, that the hosts converge (identical
// caches, HWM at the head, nothing dirty) and the audit file holds every
// commit once, in seq order. The NATS server and the blob store are off the
// mount: the host side is under test (TestPowerLossServe covers serve).
//
// SYNCLEDGER_TEST_POWERLOSS=1 turns it on; it then fails if FUSE cannot
// mount (it needs root and /dev/fuse). It prints "power loss: N cuts, V
// violations".
func TestPowerLoss(t *testing.T) {
	if os.Getenv(PowerLossEnv) == "" {
		t.Skip("set " + PowerLossEnv + "=1 to run the power-loss test (root, /dev/fuse)")
	}
	cuts := *powerLossCuts
	if cuts == 0 {
		cuts, _ = strconv.Atoi(os.Getenv(PowerLossCutsEnv))
	}
	if cuts <= 0 {
		cuts = 40
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("SYNCLEDGER_TEST_POWERLOSS_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (SYNCLEDGER_TEST_POWERLOSS_SEED), %d cuts", seed, cuts)
	p := newPowerLoss(t, seed)
	start := time.Now()
	for p.cuts < cuts && len(p.violations) < 10 {
		p.round()
		if p.cuts%20 == 0 || p.cuts == cuts {
			p.converge()
		}
		if p.cuts%10 == 0 {
			p.c.ok("snapshot", "--quiet")
		}
	}
	p.stopAll()
	t.Logf("cuts by what was running: %v; cuts that dropped unsynced data: %d; %s (%v); commands take about %v", p.during, p.lossy, time.Since(start).Round(time.Second), p.phases, p.took)
	fmt.Printf("power loss: %d cuts, %d violations\n", p.cuts, len(p.violations))
	for _, v := range p.violations {
		t.Error(v)
	}
}

// powerLoss is one run of TestPowerLoss.
type powerLoss struct {
	t     *testing.T
	c     *shell
	rng   *rand.Rand
	lfs   *lazyfs.FS
	m     *lazyfs.Mount
	lg    *natsjs.Log
	hosts map[string]*plHost
	audit string
	watch *proc
	cons  *proc
	// hist is every version the user wrote at a path, in order: the content's
	// hex digest, or "-" for a deletion.
	hist map[string][]string
	// published is, per path, the index in hist of the version the log holds last.
	published map[string]int
	read      ledger.Seq // the log is checked up to here
	commits   int        // commits in the log (the audit file must have as many lines)

	cuts, lossy int
	during      map[string]int
	violations  []string
	settle      bool                     // A's last commit was cut: sync A before the user writes again
	took        map[string]time.Duration // how long each command takes, about
	phases      map[string]time.Duration
}

// plHost is a cache on the mount and what its completed commands acknowledged.
type plHost struct {
	name  string
	hwm   ledger.Seq
	marks map[string]ledger.Seq
}

func newPowerLoss(t *testing.T, seed uint64) *powerLoss {
	srv, nc := natsjstest.RunServer(t)
	p := &powerLoss{
		t:   t,
		rng: rand.New(rand.NewPCG(seed, seed>>1|1)),
		c: &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+srv.ClientURL(), "SYNCLEDGER_LEDGER=pl",
			"SYNCLEDGER_LOG_LEVEL=error", "SYNCLEDGER_HOST=pl")},
		lfs:       lazyfs.New(),
		hosts:     map[string]*plHost{},
		hist:      map[string][]string{},
		published: map[string]int{},
		during:    map[string]int{},
		took:      map[string]time.Duration{"commit": 100 * time.Millisecond, "sync": 100 * time.Millisecond, "rebuild": 100 * time.Millisecond},
		phases:    map[string]time.Duration{},
	}
	m, err := p.lfs.Mount(t.TempDir())
	if err != nil {
		t.Fatalf("%s is set: %v", PowerLossEnv, err)
	}
	p.m = m
	t.Cleanup(func() { p.stopAll(); _ = p.m.Unmount() })
	// The blob store is on the mount too: a cut drops its puts not yet
	// durable, so checkPublished finds any event published before its content.
	p.c.ok("init", "--blobs", "file://"+filepath.Join(m.Dir, "blobs"))
	if p.lg, err = natsjs.OpenLog(context.Background(), nc, "pl"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "audit"} {
		if err := os.Mkdir(filepath.Join(m.Dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		syncPath(t, filepath.Join(m.Dir, n))
		if n != "audit" {
			p.hosts[n] = &plHost{name: n, marks: map[string]ledger.Seq{}}
		}
	}
	syncPath(t, m.Dir) // the setup is durable; from here on, only syncledger's fsyncs count
	p.audit = filepath.Join("audit", "audit.jsonl")
	for _, n := range []string{"a", "b", "c"} {
		p.cli(n, "sync")
	}
	return p
}

// syncPath fsyncs a file or directory of the test's own setup.
func syncPath(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func (p *powerLoss) dir(host string) string { return filepath.Join(p.m.Dir, host) }

func (p *powerLoss) args(host string, args ...string) []string {
	return append([]string{"--cache", p.dir(host), "--host", "host-" + host}, args...)
}

// cli runs a command with the power on; it must succeed.
func (p *powerLoss) cli(host string, args ...string) string {
	p.t.Helper()
	return p.c.ok(p.args(host, args...)...)
}

func (p *powerLoss) violation(format string, args ...any) {
	v := fmt.Sprintf("cut %d: ", p.cuts) + fmt.Sprintf(format, args...)
	p.t.Log("VIOLATION " + v)
	p.violations = append(p.violations, v)
}

var plPaths = func() []string {
	var out []string
	for m := range 3 {
		for d := range 3 {
			out = append(out, fmt.Sprintf("data/t/m%d/d/%d/raw", m, d))
		}
		out = append(out, fmt.Sprintf("data/t/m%d/d/0/attributes.yaml", m))
	}
	return out
}()

// userWrites changes a few files on A the way a user does: no fsync.
func (p *powerLoss) userWrites() {
	for range 1 + p.rng.IntN(3) {
		rel := plPaths[p.rng.IntN(len(plPaths))]
		abs := filepath.Join(p.dir("a"), filepath.FromSlash(rel))
		if p.rng.IntN(8) == 0 {
			if err := os.Remove(abs); err == nil {
				p.hist[rel] = append(p.hist[rel], "-")
			}
			continue
		}
		size := 1 + p.rng.IntN(8<<10)
		if p.rng.IntN(6) == 0 {
			size = 200<<10 + p.rng.IntN(100<<10) // several FUSE writes
		}
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(p.rng.Uint32())
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(abs, b, 0o644); err != nil {
			p.t.Fatal(err)
		}
		d := ledger.DigestOf(b)
		p.hist[rel] = append(p.hist[rel], hex.EncodeToString(d[:]))
	}
}

// round starts the processes, cuts the power at a random point, restarts
// and checks.
func (p *powerLoss) round() {
	t := p.t
	t0 := time.Now()
	if p.settle {
		p.cli("a", "sync") // apply A's own commit if it reached the log
		p.settle = false
	}
	p.userWrites()
	if p.watch == nil {
		p.watch = startProc(t, p.c.env, p.args("b", "watch", "--json")...)
	}
	if p.cons == nil {
		p.cons = startProc(t, p.c.env, "consume", "audit", "--file", filepath.Join(p.m.Dir, p.audit))
	}
	commit := startProc(t, p.c.env, p.args("a", "commit", "--json", "-m", fmt.Sprint("round ", p.cuts))...)
	cverb := "sync"
	if p.rng.IntN(3) == 0 {
		cverb = "rebuild"
	}
	cargs := []string{cverb, "--json"}
	if cverb == "rebuild" {
		cargs = append(cargs, "--quiet")
	}
	other := startProc(t, p.c.env, p.args("c", cargs...)...)
	// Cut at a random point of the commands' run: up to how long
	// the slower of them has been taking. One round in eight lets them end
	// (cutting only watch and the consumer) and measures how long they take.
	began := time.Now()
	delay := time.Duration(p.rng.Int64N(int64(max(p.took["commit"], p.took[cverb])) + 1))
	calibrate := p.rng.IntN(8) == 0
	if calibrate {
		delay = time.Minute
	}
	ended := map[string]time.Duration{}
	for time.Since(began) < delay && len(ended) < 2 {
		for verb, q := range map[string]*proc{"commit": commit, cverb: other} {
			if _, ok := ended[verb]; !ok && exited(q) {
				ended[verb] = time.Since(began)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	for verb, d := range ended {
		if calibrate {
			p.took[verb] = (p.took[verb] + d) / 2
		}
	}
	if cverb == "rebuild" { // a rebuild starts a new state: HWM and marks may move back
		p.hosts["c"].hwm, p.hosts["c"].marks = 0, map[string]ledger.Seq{}
	}

	// The cut: what had finished by now was acknowledged; kill the rest.
	running := []string{"watch", "audit"}
	if exited(commit) {
		p.acked("a", commit, "commit")
	} else {
		running = append(running, "commit")
		p.settle = true
	}
	if exited(other) {
		p.acked("c", other, cverb)
	} else {
		running = append(running, cverb)
	}
	slices.Sort(running)
	p.during[strings.Join(running, "+")]++
	for _, q := range []*proc{commit, other, p.watch, p.cons} {
		q.kill()
	}
	p.watch, p.cons = nil, nil
	t1 := time.Now()
	if err := p.m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if st := p.lfs.Drop(); st.Nodes > 0 {
		p.lossy++
	}
	m, err := p.lfs.Mount(p.m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	p.m = m
	p.cuts++
	t2 := time.Now()
	p.check()
	p.phases["run"] += t1.Sub(t0)
	p.phases["remount"] += t2.Sub(t1)
	p.phases["check"] += time.Since(t2)
}

// exited reports whether q ended on its own (before the cut).
func exited(q *proc) bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}

// acked records what a command that completed before the cut reported.
func (p *powerLoss) acked(host string, q *proc, verb string) {
	var out []string
	for l := range q.lines {
		out = append(out, l)
	}
	if q.err != nil {
		var ee interface{ ExitCode() int }
		if errors.As(q.err, &ee) && ee.ExitCode() != 0 {
			p.t.Logf("cut %d: %s on %s exited %d: %s", p.cuts, verb, host, ee.ExitCode(), strings.TrimSpace(q.stderr.String()))
		}
		return
	}
	var r struct {
		HWM        ledger.Seq   `json:"hwm"`
		Seqs       []ledger.Seq `json:"seqs"`
		Partitions []string     `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(strings.Join(out, "\n")), &r); err != nil {
		p.t.Fatalf("%s on %s: %v\n%s", verb, host, err, out)
	}
	h := p.hosts[host]
	h.hwm = max(h.hwm, r.HWM)
	for i, part := range r.Partitions {
		if i < len(r.Seqs) {
			h.marks[part] = max(h.marks[part], r.Seqs[i])
		}
	}
}

// stopAll kills the long-running processes.
func (p *powerLoss) stopAll() {
	for _, q := range []*proc{p.watch, p.cons} {
		if q != nil {
			q.kill()
		}
	}
	p.watch, p.cons = nil, nil
}

// hostState is what a host's state database holds, read from a copy (the
// test process serves the mount: it must not mmap a file on it).
type hostState struct {
	st      statedb.State
	rows    map[string]statedb.Entry
	journal map[string]statedb.JournalEntry
}

func (p *powerLoss) state(host string) (hostState, error) {
	b, err := os.ReadFile(filepath.Join(p.dir(host), ledger.StateDir, "state.db"))
	if err != nil {
		return hostState{}, err
	}
	cp := filepath.Join(p.t.TempDir(), "state.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		p.t.Fatal(err)
	}
	db, err := statedb.Open(cp, time.Second)
	if err != nil {
		return hostState{}, err
	}
	defer db.Close()
	hs := hostState{rows: map[string]statedb.Entry{}}
	if hs.st, err = db.Load(); err != nil {
		return hs, err
	}
	if err := db.ForEach(func(path string, e statedb.Entry) error { hs.rows[path] = e; return nil }); err != nil {
		return hs, err
	}
	hs.journal, err = db.Journal()
	return hs, err
}

// disk returns the version at rel in a host's cache: hex digest or "-".
func (p *powerLoss) disk(host, rel string) string {
	b, err := os.ReadFile(filepath.Join(p.dir(host), filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "-"
	}
	if err != nil {
		p.t.Fatal(err)
	}
	d := ledger.DigestOf(b)
	return hex.EncodeToString(d[:])
}

// check runs the after-cut checks.
func (p *powerLoss) check() {
	for _, name := range []string{"a", "b", "c"} {
		h := p.hosts[name]
		hs, err := p.state(name)
		if err != nil {
			if h.hwm > 0 || len(h.marks) > 0 {
				p.violation("host %s: state lost after acknowledging hwm %d: %v", name, h.hwm, err)
			}
			continue
		}
		if hs.st.HWM < h.hwm {
			p.violation("host %s: hwm %d after the cut, a completed command reported %d", name, hs.st.HWM, h.hwm)
		}
		for part, seq := range h.marks {
			if m := hs.st.Marks[part]; m.Seq < seq {
				p.violation("host %s: mark of %s at seq %d after the cut, its acknowledged commit is at seq %d", name, part, m.Seq, seq)
			}
		}
		for rel, row := range hs.rows {
			if row.Lazy {
				continue
			}
			claim := hex.EncodeToString(row.Digest[:])
			got := p.disk(name, rel)
			if got == claim {
				continue
			}
			if j, ok := hs.journal[rel]; ok && p.journalled(j, got) {
				continue // an interrupted apply's file: the next sync replaces it
			}
			if name == "a" && p.userAfter(rel, claim, got) {
				continue // the user changed it since: a local change, committed next
			}
			p.violation("host %s: state claims %s holds %.12s, the file holds %.12s", name, rel, claim, got)
		}
	}
	p.checkPublished()
}

func (p *powerLoss) journalled(j statedb.JournalEntry, got string) bool {
	if got == "-" {
		return j.Removed
	}
	for _, d := range j.Digests {
		if hex.EncodeToString(d[:]) == got {
			return true
		}
	}
	return false
}

// userAfter reports whether the user wrote got at rel after claim.
func (p *powerLoss) userAfter(rel, claim, got string) bool {
	h := p.hist[rel]
	i := slices.Index(h, claim)
	return i >= 0 && slices.Contains(h[i+1:], got)
}

// checkPublished reads the events appended since the last check: each entry
// must be a version the user wrote, later than the one published before it.
func (p *powerLoss) checkPublished() {
	head, err := p.lg.LastSeq(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	if head <= p.read {
		return
	}
	objs, err := fileblob.New(fileblob.Config{Dir: filepath.Join(p.m.Dir, "blobs")})
	if err != nil {
		p.t.Fatal(err)
	}
	blobs := ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})
	err = p.lg.Read(context.Background(), p.read+1, head, func(r ledger.Record) error {
		if r.Event.Part == r.Event.Parts {
			p.commits++
		}
		if len(r.Event.Entries) == 0 {
			return fmt.Errorf("seq %d: entries in a manifest (the harness keeps commits small)", r.Seq)
		}
		for _, e := range r.Event.Entries {
			v := "-"
			if !e.Deleted {
				v = hex.EncodeToString(e.SHA256[:])
				if _, err := ledger.ReadBlob(context.Background(), blobs, e.SHA256); err != nil {
					p.violation("seq %d publishes %.12s at %s, whose blob the store does not hold whole after the cut: %v", r.Seq, v, e.Path, err)
				}
			}
			h := p.hist[e.Path]
			from := p.published[e.Path] + 1
			if _, ok := p.published[e.Path]; !ok {
				from = 0
			}
			i := slices.Index(h[min(from, len(h)):], v)
			if i < 0 {
				p.violation("seq %d publishes %.12s at %s: not a version the user wrote after the one published before (history %d versions, last published #%d)", r.Seq, v, e.Path, len(h), p.published[e.Path])
				continue
			}
			p.published[e.Path] = from + i
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.read = head
}

// converge, with the power on, commits what A still has, syncs every host,
// and checks that the caches are identical and up to date, and the audit file
// complete.
func (p *powerLoss) converge() {
	t := p.t
	for _, name := range []string{"a", "b", "c"} {
		if r := p.c.run(p.args(name, "sync")...); r.code != 0 {
			p.violation("host %s does not converge: sync exits %d: %s", name, r.code, r.stderr)
			return
		}
	}
	p.settle = false
	p.cli("a", "commit", "-m", "converge")
	for _, name := range []string{"a", "b", "c"} {
		p.cli(name, "sync")
	}
	p.checkPublished()
	ta := tree(t, p.dir("a"))
	for _, name := range []string{"b", "c"} {
		tb := tree(t, p.dir(name))
		var diffs []string
		for _, rel := range slices.Sorted(maps.Keys(mergeKeys(ta, tb))) {
			if va, vb := p.disk("a", rel), p.disk(name, rel); va != vb {
				hs, _ := p.state(name)
				row := hs.rows[rel]
				diffs = append(diffs, fmt.Sprintf("%s: A %.12s, %s %.12s (row %x, journal %v, history %.12v)", rel, va, name, vb, row.Digest[:6], hs.journal[rel], p.hist[rel]))
			}
		}
		if len(diffs) > 0 {
			p.violation("host %s's cache differs from A's after converging: %s", name, strings.Join(diffs, "; "))
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		st := p.c.status(p.dir(name))
		if st.HWM != st.Head || len(st.Dirty) != 0 {
			p.violation("host %s after converging: hwm %d head %d dirty %v", name, st.HWM, st.Head, st.Dirty)
		}
	}
	// The audit consumer catches up and its file holds every commit once.
	cons := startProc(t, p.c.env, "consume", "audit", "--file", filepath.Join(p.m.Dir, p.audit))
	defer cons.kill()
	path := filepath.Join(p.m.Dir, p.audit)
	deadline := time.Now().Add(60 * time.Second)
	var seqs []ledger.Seq
	for time.Now().Before(deadline) {
		if seqs = auditSeqs(t, path); len(seqs) >= p.commits {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(seqs) != p.commits || !slices.IsSorted(seqs) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
		p.violation("audit file holds %d lines for %d commits (in order, once each: %v)", len(seqs), p.commits, slices.IsSorted(seqs))
	}
	if b, _ := os.ReadFile(path); len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		p.violation("audit file ends with a partial line")
	}
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestPowerLossServe runs `syncledger serve` with its data directory (the
// JetStream store and the file blob store) on a lazyfs mount that journals
// metadata as ext4, XFS and btrfs do (lazyfs.FS.MetadataJournal), commits to it
// from a host off the mount, and cuts the power at random points of the
// commits: serve and the commit in flight are killed, what was not fsynced is
// dropped, serve restarts on what is left. Every commit acknowledged before a
// cut must be in the log after it, the committing host must find the log's
// head at or above its HWM, and a fresh host must sync every file (no blob
// lost). serve promises no more than this: under strict POSIX semantics (a
// name durable only once its directory is fsynced) JetStream can lose whole
// streams it created, which is nats-server's code (docs/ops.md).
func TestPowerLossServe(t *testing.T) {
	if os.Getenv(PowerLossEnv) == "" {
		t.Skip("set " + PowerLossEnv + "=1 to run the power-loss tests (root, /dev/fuse)")
	}
	lfs := lazyfs.New()
	lfs.MetadataJournal = os.Getenv("SYNCLEDGER_TEST_POWERLOSS_STRICT") == ""
	m, err := lfs.Mount(t.TempDir())
	if err != nil {
		t.Fatalf("%s is set: %v", PowerLossEnv, err)
	}
	var srv *proc
	t.Cleanup(func() {
		if srv != nil {
			srv.kill()
		}
		_ = m.Unmount()
	})
	data := filepath.Join(m.Dir, "serve")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	cache := t.TempDir()
	acked := map[string]bool{}
	var violations []string
	const cuts = 12
	took := 300 * time.Millisecond
	for cut := range cuts {
		var url string
		srv, url, _ = serveT(t, data)
		env := cliEnv("SYNCLEDGER_NATS="+url, "SYNCLEDGER_LOG_LEVEL=error", "SYNCLEDGER_HOST=h")
		c := &shell{t: t, env: env}
		// After the cut before: the server holds what it acknowledged.
		if r := c.run("--cache", cache, "sync"); r.code != 0 {
			violations = append(violations, fmt.Sprintf("cut %d: the committing host cannot sync after the restart: %s", cut, r.stderr))
		}
		if ids := serveCommits(t, url); cut > 0 {
			for id := range acked {
				if !ids[id] {
					violations = append(violations, fmt.Sprintf("cut %d: acknowledged commit %s is not in the log after the restart", cut, id))
				}
			}
		}
		fresh := t.TempDir()
		if r := c.run("--cache", fresh, "sync"); r.code != 0 {
			violations = append(violations, fmt.Sprintf("cut %d: a fresh host cannot sync: %s", cut, r.stderr))
		}
		// Commits, the last one cut at a random point.
		for i := range 3 {
			put(t, cache, fmt.Sprintf("data/t/m%d/d/%d/raw", rng.IntN(3), cut), fmt.Sprint("cut ", cut, " commit ", i, " ", rng.Uint64()))
			q := startProc(t, env, "--cache", cache, "commit", "--json", "-m", fmt.Sprint(cut, "/", i))
			began := time.Now()
			if i < 2 {
				<-q.done
				took = (took + time.Since(began)) / 2
			} else {
				time.Sleep(time.Duration(rng.Int64N(int64(took) + 1)))
			}
			if exited(q) {
				var r struct {
					Commit string `json:"commit"`
				}
				var out []string
				for l := range q.lines {
					out = append(out, l)
				}
				if q.err == nil && json.Unmarshal([]byte(strings.Join(out, "\n")), &r) == nil && r.Commit != "" {
					acked[r.Commit] = true
				}
			}
			q.kill()
		}
		srv.kill()
		srv = nil
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		lfs.Drop()
		if m, err = lfs.Mount(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("power loss (serve): %d cuts, %d acknowledged commits, %d violations\n", cuts, len(acked), len(violations))
	for _, v := range violations {
		t.Error(v)
	}
}

// serveCommits returns the ids of the commits in the default ledger's log.
func serveCommits(t *testing.T, url string) map[string]bool {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	lg, err := natsjs.OpenLog(context.Background(), nc, "default")
	if err != nil {
		t.Fatalf("the default ledger after the restart: %v", err)
	}
	ids := map[string]bool{}
	if err := lg.Read(context.Background(), 1, 0, func(r ledger.Record) error { ids[r.Event.Commit] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return ids
}

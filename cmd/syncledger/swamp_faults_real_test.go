//go:build unix

package main

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// The faults of a swamp team's week (issue 25) through the real swamp CLI:
// a swamp killed while it holds a lock, heartbeats, host-role credentials.

// TestSwampRealKill: swamp killed with kill -9 while it holds a model lock.
// Its agent sees its input close and releases the lock at once: the other
// host gets it within seconds though the lock's TTL is 30 s, and the killed
// host's next command succeeds. A host that dies as a whole (swamp and its
// agent) frees its locks only by their TTL.
func TestSwampRealKill(t *testing.T) {
	w := newRealSwamp(t)
	a := w.repo("host-a", "--lock-ttl-ms", "30000")
	b := w.repo("host-b") // TTL 3 s
	locks := w.locks()
	key := "data/command/shell/" + modelID(t, w.template, "slow") + "/.lock"

	// a dies (kill -9) in slow's run, holding its lock, once the run wrote
	// into the cache; its agent lives on.
	started := time.Now()
	ck := w.cmd(a, "model", "method", "run", "slow", "execute")
	if err := ck.Start(); err != nil {
		t.Fatal(err)
	}
	held := w.waitHeld(locks, key, "")
	if held.TTLMs != 30000 {
		t.Fatalf("a holds slow's lock with TTL %d ms, want 30000", held.TTLMs)
	}
	written := w.waitWritten(a, started)
	if info, _ := locks.Inspect(t.Context(), key); info == nil || info.Nonce != held.Nonce {
		t.Fatalf("a's run ended before the kill (it wrote %s)", written)
	}
	if err := ck.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = ck.Wait()
	killed := time.Now()
	t.Logf("a killed once its run wrote %s; left uncommitted: %q", written, w.status(a).Dirty)
	for {
		info, err := locks.Inspect(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if info == nil || info.Nonce != held.Nonce {
			break
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("a's lock still held %v after its swamp was killed (TTL 30 s)", time.Since(killed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a's lock released %v after its swamp was killed (TTL 30 s)", time.Since(killed))
	start := time.Now()
	w.mustSwamp(b, "model", "method", "run", "slow", "execute")
	t.Logf("b's run of slow took %v", time.Since(start))
	// The killed host's next command succeeds, and both hosts agree.
	w.mustSwamp(a, "model", "method", "run", "slow", "execute")
	w.synced(a, b)

	// b dies as a whole (swamp and agent, one process group): its lock
	// expires after its TTL (3 s, renewed every 1 s), then a gets it.
	cb := w.cmd(b, "model", "method", "run", "slow", "execute")
	cb.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cb.Start(); err != nil {
		t.Fatal(err)
	}
	held = w.waitHeld(locks, key, "")
	if err := syscall.Kill(-cb.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cb.Wait()
	killed = time.Now()
	if info, _ := locks.Inspect(t.Context(), key); info == nil || info.Nonce != held.Nonce {
		t.Fatalf("right after b died as a whole the lock is %+v, want still b's (%s) until its TTL", info, held.Nonce)
	}
	taken := make(chan time.Duration, 1)
	go func() {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if info, err := locks.Inspect(t.Context(), key); err == nil && info != nil && info.Nonce != held.Nonce {
				taken <- time.Since(killed)
				return
			}
		}
		taken <- -1
	}()
	w.mustSwamp(a, "model", "method", "run", "slow", "execute")
	after := <-taken
	t.Logf("a took slow's lock %v after b died as a whole (TTL 3 s)", after)
	// b renewed at most a third of the TTL before it died: the lock cannot
	// pass before two thirds of the TTL (2 s) after it.
	if after < 1500*time.Millisecond {
		t.Fatalf("a took the lock %v after b died, before b's TTL ran out", after)
	}
	// A swamp killed mid-write may leave its temp file (as it writes
	// .<uuid>.tmp, then renames): b's cache keeps it, ignored, and it is
	// never published — as every run, here one left on purpose.
	tmp := "definitions-evaluated/command/shell/.killed-mid-write.tmp"
	put(t, w.cache(b), tmp, "half a definition")
	w.mustSwamp(b, "model", "method", "run", "slow", "execute")
	w.synced(a, b)
	if st := w.status(b); !slices.Contains(st.Ignored, tmp) {
		t.Fatalf("b's status does not list %s as ignored: %v", tmp, st.Ignored)
	}
	if _, ok := tree(t, w.cache(a))[tmp]; ok {
		t.Fatalf("b's temp file %s reached a", tmp)
	}
}

// waitWritten waits until swamp wrote a file into repo's cache after since
// (not syncledger's state, not swamp's catalog database) and returns its path.
func (w *realSwamp) waitWritten(repo string, since time.Time) string {
	w.t.Helper()
	cache := w.cache(repo)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var found string
		_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
			if err != nil || found != "" {
				return err
			}
			if d.IsDir() {
				if d.Name() == ledger.StateDir {
					return filepath.SkipDir
				}
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.ModTime().After(since) && !strings.Contains(d.Name(), "_catalog.db") {
				found, _ = filepath.Rel(cache, p)
			}
			return nil
		})
		if found != "" {
			return found
		}
	}
	w.t.Fatalf("swamp wrote nothing into %s's cache", repo)
	return ""
}

// TestSwampRealHeartbeat: the agent records its host's position after its
// pulls and pushes, as sync does: `hosts` shows each swamp host at the mark
// its cache really has.
func TestSwampRealHeartbeat(t *testing.T) {
	w := newRealSwamp(t)
	a, b := w.repo("host-a"), w.repo("host-b")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	w.mustSwamp(b, "model", "method", "run", "other", "execute")
	// b pulled a's run and published its own: b is at the head, a behind.
	w.hostsAt(map[string]string{"host-a": a, "host-b": b}, "host-b")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	w.hostsAt(map[string]string{"host-a": a, "host-b": b}, "host-a")
}

// hostsAt waits until `hosts --json` shows each host of repos (id → repo)
// at its cache's HWM, as a swamp command recorded it, with atHead at the
// ledger's head and the others behind it by what they lack.
func (w *realSwamp) hostsAt(repos map[string]string, atHead string) {
	w.t.Helper()
	want := map[string]uint64{}
	for id, repo := range repos {
		want[id] = w.status(repo).HWM
	}
	var got struct {
		Head  uint64    `json:"head"`
		Hosts []hostRow `json:"hosts"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out := w.c.ok("hosts", "--json")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			w.t.Fatalf("hosts --json: %v\n%s", err, out)
		}
		ok := got.Head > 0 && want[atHead] == got.Head
		seen := 0
		for _, h := range got.Hosts {
			if hwm, mine := want[h.Host]; mine {
				seen++
				ok = ok && uint64(h.HWM) == hwm && h.Behind == got.Head-hwm && h.Command == "swamp"
			}
		}
		if ok && seen == len(want) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("hosts --json: %+v; want %v (cache HWMs; %s at the head) recorded by swamp", got, want, atHead)
		}
	}
}

// TestSwampRealHostRole: with host-role credentials (serve --users) the
// agent works — it takes its lock, pulls and pushes — and a user whose role
// lacks the swamp bucket (tooling) is told so, naming the subject and the
// role, while its other requests go on.
func TestSwampRealHostRole(t *testing.T) {
	w := newRealSwampWorld(t)
	users := writeFile(t, filepath.Join(w.dir, "users.yaml"), `users:
  - {user: ops, password: ops-pw, role: admin}
  - {user: web, password: web-pw, role: host}
  - {user: grafana, password: graf-pw, role: tooling}
`)
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users, "SYNCLEDGER_LEDGER=swamp"), "--listen", "127.0.0.1:0",
		"--data", filepath.Join(w.dir, "data"), "--blobs", fileURL(filepath.Join(w.dir, "blobs")))
	defer srv.stop(t, syscall.SIGTERM)
	if info.Auth != "users" || info.Ledger != "swamp" {
		t.Fatalf("serve --json: %+v", info)
	}
	w.start(info.URL, "NATS_USER=ops", "NATS_PASSWORD=ops-pw") // setup and checks as the admin
	a, b := w.repo("host-a"), w.repo("host-b")

	w.swampEnv = []string{"NATS_USER=web", "NATS_PASSWORD=web-pw"}
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	if st := w.status(a); st.Head == 0 || st.HWM != st.Head || len(st.Dirty) != 0 {
		t.Fatalf("a after its run as the host role: %+v, want its run published", st)
	}
	if out := w.mustSwamp(b, "model", "method", "run", "consumer", "execute"); !strings.Contains(out, "consumer sees vpc-0abc123") {
		t.Fatalf("b, as the host role, does not see a's run:\n%s", out)
	}
	if st := w.status(b); st.HWM != st.Head || len(st.Dirty) != 0 {
		t.Fatalf("b after its run as the host role: %+v", st)
	}

	// The tooling role may read the ledger but not use the swamp bucket.
	w.swampEnv = []string{"NATS_USER=grafana", "NATS_PASSWORD=graf-pw"}
	out, code := w.run(b, "model", "method", "run", "vpc", "execute")
	if code == 0 || !strings.Contains(out, "SYNCLEDGER_SWAMP_swamp") || !strings.Contains(out, "host role") ||
		!strings.Contains(out, "refused") || strings.Contains(out, "context canceled") {
		t.Fatalf("a tooling user's model run: exit %d; want the refusal named (subject, role):\n%s", code, out)
	}
	t.Logf("a tooling user's model run: %s", strings.TrimSpace(out))
	if out := w.mustSwamp(b, "datastore", "status"); !strings.Contains(out, "healthy") {
		t.Fatalf("datastore status as tooling (the ledger answers; the bucket was refused):\n%s", out)
	}
}

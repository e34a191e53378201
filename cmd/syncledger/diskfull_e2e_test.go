package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/internal/smallfs"
	"github.com/syncledger/syncledger/ledger"
)

// serveOn starts `syncledger serve` on data with extra flags and returns it
// with its client URL.
func serveOn(t *testing.T, data string, extra ...string) (*proc, string) {
	t.Helper()
	p := startProc(t, cliEnv(), append([]string{"serve", "--listen", "127.0.0.1:0", "--data", data}, extra...)...)
	url := urlRE.FindString(p.line(t, `listening on nats://`))
	p.line(t, `Stop with Ctrl-C`)
	return p, url
}

// writeRandom writes n random bytes to the cache file rel.
func writeRandom(t *testing.T, cache, rel string, n int) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(cache, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServerDiskFullCLI (SYNCLEDGER_TEST_DISKFULL, root) is issue 39's point
// 2 through the binary: serve on a small tmpfs of its own, blobs in its NATS
// object store. Two hosts commit until the server refuses: the refusal comes
// in seconds (not minutes of retried acks), as "the server's disk is full",
// naming serve's data directory, its free space and what to free; status,
// hosts and their --json say so. Space is freed beside the store, serve is
// not restarted, and the next commit succeeds; both hosts converge with every
// acknowledged commit in the ledger.
func TestServerDiskFullCLI(t *testing.T) {
	dir := smallfs.MountT(t, 48<<20)
	filler := filepath.Join(dir, "filler")
	if _, err := smallfs.Fill(filler, 20<<20); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	srv, url := serveOn(t, data, "--blobs", "nats://diskfull")
	env := cliEnv("SYNCLEDGER_NATS="+url, "SYNCLEDGER_LOG_LEVEL=warn")
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	sl := func(cache string, args ...string) result {
		t.Helper()
		host := filepath.Base(cache)
		return cli(t, env, append([]string{"--cache", cache, "--host", host}, args...)...)
	}
	for _, c := range []string{a, b} {
		if r := sl(c, "sync"); r.code != 0 {
			t.Fatalf("sync: %d %s", r.code, r.stderr)
		}
	}

	// Commits of 1 MiB until the server refuses one.
	var acked []string // commit ids acknowledged
	commit := func(cache, rel string) (result, time.Duration) {
		t.Helper()
		writeRandom(t, cache, rel, 1<<20)
		start := time.Now()
		r := sl(cache, "commit", "--json", "-m", rel)
		took := time.Since(start)
		if r.code == 0 {
			var res struct{ Commit string }
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Commit == "" {
				t.Fatalf("commit --json: %v %q", err, r.stdout)
			}
			acked = append(acked, res.Commit)
		}
		return r, took
	}
	var refused result
	var took time.Duration
	for i := range 40 {
		r, d := commit(a, "data/m/a"+string(rune('a'+i)))
		if r.code != 0 {
			refused, took = r, d
			break
		}
	}
	if refused.code == 0 {
		t.Fatal("40 commits of 1 MiB on a 20 MiB disk: none refused")
	}
	t.Logf("after %d commits, refused in %v: %s", len(acked), took, refused.stderr)
	var obj struct {
		Error struct {
			Kind    string
			Message string
			Detail  map[string]any
		}
	}
	if err := json.Unmarshal([]byte(refused.stdout), &obj); err != nil {
		t.Fatalf("the refusal's --json: %v %q", err, refused.stdout)
	}
	free := regexp.MustCompile(regexp.QuoteMeta(data) + ` has [0-9.]+ [KM]iB free of 48.0 MiB; the server refuses writes below 4.8 MiB free and takes them again at 7.2 MiB`)
	switch {
	case refused.code != exitError || obj.Error.Kind != "server-full":
		t.Errorf("the refused commit: exit %d, kind %q; want %d, server-full", refused.code, obj.Error.Kind, exitError)
	case took > 10*time.Second:
		t.Errorf("the refusal took %v: want seconds", took)
	case !strings.Contains(refused.stderr, "the server's disk is full") || !free.MatchString(refused.stderr):
		t.Errorf("the refusal does not name the directory and its free space:\n%s", refused.stderr)
	case !regexp.MustCompile(`free [0-9.]+ [KM]iB on the disk of serve's data directory ` + regexp.QuoteMeta(data) + `, then run this again`).MatchString(refused.stderr):
		t.Errorf("the refusal gives no way out naming the space to free:\n%s", refused.stderr)
	case obj.Error.Detail["dir"] != data || obj.Error.Detail["need"] == nil:
		t.Errorf("the refusal's --json detail: %v", obj.Error.Detail)
	}

	// The other host is refused as fast; status and hosts say why.
	r, d := commit(b, "data/m/b1")
	if r.code == 0 || !strings.Contains(r.stderr, "the server's disk is full") || d > 10*time.Second {
		t.Errorf("the other host's commit on a full server: exit %d after %v\n%s", r.code, d, r.stderr)
	}
	st := sl(a, "status")
	if !regexp.MustCompile(`server\s+DISK FULL, refusing writes: ` + regexp.QuoteMeta(data) + ` has`).MatchString(st.stdout) {
		t.Errorf("status on a full server:\n%s%s", st.stdout, st.stderr)
	}
	var sj struct {
		Server *ledger.ServerState
		Dirty  []string
	}
	if r := sl(a, "status", "--json"); json.Unmarshal([]byte(r.stdout), &sj) != nil || sj.Server == nil || !sj.Server.Full || sj.Server.Dir != data || len(sj.Dirty) != 1 {
		t.Errorf("status --json on a full server: %s %s", r.stdout, r.stderr)
	}
	if r := sl(a, "hosts"); !strings.Contains(r.stdout, "the server's disk is full, every host's writes are refused: "+data) {
		t.Errorf("hosts on a full server:\n%s%s", r.stdout, r.stderr)
	}

	// Space freed beside the store; serve goes on, the next commits succeed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	for {
		if r := sl(a, "status", "--json"); json.Unmarshal([]byte(r.stdout), &sj) == nil && sj.Server != nil && !sj.Server.Full {
			break
		}
		if time.Since(freed) > 10*time.Second {
			t.Fatalf("the server still says it is full 10 s after space was freed: %+v", sj.Server)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the server takes writes again %v after space was freed", time.Since(freed))
	before := len(acked)
	if r := sl(a, "commit", "--json", "-m", "after"); r.code != 0 {
		t.Fatalf("the commit after space was freed: exit %d\n%s", r.code, r.stderr)
	} else {
		var res struct{ Commit string }
		json.Unmarshal([]byte(r.stdout), &res)
		acked = append(acked, res.Commit)
	}
	if r := sl(b, "commit", "--json", "-m", "after"); r.code != 0 {
		t.Fatalf("the other host's commit after space was freed: exit %d\n%s", r.code, r.stderr)
	} else {
		var res struct{ Commit string }
		json.Unmarshal([]byte(r.stdout), &res)
		acked = append(acked, res.Commit)
	}
	if len(acked) != before+2 {
		t.Fatalf("acked %d, want %d", len(acked), before+2)
	}
	select {
	case <-srv.done:
		t.Fatalf("serve exited: %v\n%s", srv.err, srv.stderr)
	default:
	}

	// Every host converges; every acknowledged commit is in the ledger.
	for _, c := range []string{a, b, a} {
		if r := sl(c, "sync"); r.code != 0 {
			t.Fatalf("sync: %d %s", r.code, r.stderr)
		}
	}
	if diff := cmp.Diff(tree(t, a), tree(t, b)); diff != "" {
		t.Errorf("the hosts differ (-a +b):\n%s", diff)
	}
	logged := map[string]bool{}
	r = cli(t, env, "log", "--json")
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var rec struct{ Event ledger.Event }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log --json: %v %q", err, line)
		}
		logged[rec.Event.Commit] = true
	}
	for _, id := range acked {
		if !logged[id] {
			t.Errorf("acknowledged commit %s is not in the ledger", id)
		}
	}
	t.Logf("%d acknowledged commits, all in the ledger; the hosts agree", len(acked))
}

// TestCacheDiskFullCLI (SYNCLEDGER_TEST_DISKFULL, root): a host whose cache's
// disk is full keeps working as before — its sync fails, keeping what it
// applied — and says how much the pull needs (exit 1, kind cache-full, the
// free space and the pull's size); once space is freed, it syncs.
func TestCacheDiskFullCLI(t *testing.T) {
	dir := smallfs.MountT(t, 16<<20)
	_, url := serveOn(t, t.TempDir())
	env := cliEnv("SYNCLEDGER_NATS="+url, "SYNCLEDGER_LOG_LEVEL=warn")
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(dir, "b")
	for i := range 6 {
		writeRandom(t, a, "data/m/f"+string(rune('0'+i)), 1<<20)
	}
	if r := cli(t, env, "--cache", a, "commit", "-m", "six"); r.code != 0 {
		t.Fatalf("commit: %s", r.stderr)
	}
	filler := filepath.Join(dir, "filler")
	if _, err := smallfs.Fill(filler, 3<<20); err != nil {
		t.Fatal(err)
	}
	r := cli(t, env, "--cache", b, "sync", "--json")
	var obj struct {
		Error struct{ Kind, Message string }
	}
	json.Unmarshal([]byte(r.stdout), &obj)
	t.Logf("sync into a full cache: exit %d\n%s", r.code, r.stderr)
	want := regexp.MustCompile(`the cache's disk is full \(` + regexp.QuoteMeta(b) + ` has [0-9.]+ [KM]?i?B free; the rest of this pull, seqs 1\.\.1, is 6\.0 MiB in 6 files\).*` +
		`\(free up to [0-9.]+ MiB on the disk of the cache ` + regexp.QuoteMeta(b) + ` \(the rest of the pull is 6\.0 MiB; .* is free\), then sync again`)
	if r.code != exitError || obj.Error.Kind != "cache-full" || !want.MatchString(r.stderr) {
		t.Errorf("sync into a full cache: exit %d, kind %q, want %d, cache-full, and the pull's size", r.code, obj.Error.Kind, exitError)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, env, "--cache", b, "sync"); r.code != 0 {
		t.Fatalf("sync once space is freed: %s", r.stderr)
	}
	if diff := cmp.Diff(tree(t, a), tree(t, b)); diff != "" {
		t.Errorf("the caches differ (-a +b):\n%s", diff)
	}
}

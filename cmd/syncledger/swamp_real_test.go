package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/internal/agenttrace"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/swamp"
	"github.com/syncledger/syncledger/swamp/agent"
)

// The tests in this file drive the real swamp CLI (swamp-club/swamp under
// Deno; ../shared/tools/swamp/install.sh prints its path) through the
// @syncledger/datastore extension that `syncledger swamp setup` writes. They
// run when SYNCLEDGER_TEST_SWAMP names that swamp; set and unusable, they fail.

// swampModels are the command/shell models of the test repos: consumer reads
// vpc's output through the model map (the swamp-club#3193 pair); slow holds its
// per-model lock for a while.
var swampModels = map[string]string{
	"vpc":      `echo vpc-0abc123`,
	"consumer": `echo "consumer sees ${{ model.vpc.resource.result.result.attributes.stdout }}"`,
	"other":    `echo other`,
	"slow":     `sleep 4; echo slow`,
}

// realSwamp is a test's world: one ledger on a NATS server, the swamp CLI, and
// a template repo whose models every host's repo copies (as a git checkout
// would).
type realSwamp struct {
	t        *testing.T
	swamp    string
	dir      string
	c        *shell
	nats     string
	srv      *natsjstest.Server // the NATS server (Kill, Restart)
	template string
	bin      string            // the syncledger binary the repos' extension runs
	ns       map[string]string // repo → its datastore's namespace, if any
	swampEnv []string          // more environment for swamp (and its agent)
}

// newRealSwamp is a world on a server of its own, without authorization, and
// the ledger "swamp".
func newRealSwamp(t *testing.T) *realSwamp {
	t.Helper()
	w := newRealSwampWorld(t)
	srv, _ := natsjstest.RunServer(t)
	w.srv = srv
	w.start(srv.ClientURL())
	w.c.ok("init", "--blobs", fileURL(filepath.Join(w.dir, "blobs")))
	return w
}

// newRealSwampWorld is a world without a server yet (start).
func newRealSwampWorld(t *testing.T) *realSwamp {
	t.Helper()
	bin := os.Getenv("SYNCLEDGER_TEST_SWAMP")
	if bin == "" {
		t.Skip("set SYNCLEDGER_TEST_SWAMP to the swamp CLI (SWAMP=$(../shared/tools/swamp/install.sh)) to run the real-swamp tests")
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "swamp") {
		t.Fatalf("SYNCLEDGER_TEST_SWAMP=%s is not a usable swamp CLI: %v\n%s", bin, err, out)
	}
	// Deno refuses paths under /dev (TMPDIR=/dev/shm) without --allow-all.
	base := os.TempDir()
	if strings.HasPrefix(base, "/dev/") {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "syncledger-swamp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &realSwamp{t: t, swamp: bin, dir: dir, ns: map[string]string{}}
	// The binary too must not be under /dev for Deno.
	w.bin = filepath.Join(dir, "syncledger")
	if out, err := exec.Command("cp", binPath, w.bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the binary: %v %s", err, out)
	}

	w.template = filepath.Join(dir, "template")
	w.mustSwamp(w.template, "repo", "init", "--tool", "none")
	for name, run := range swampModels {
		w.model(name, run)
	}
	return w
}

// teeAgents makes the repos set up after it run their agent through a
// wrapper that copies its stderr to a file, and returns that file: what the
// agent said, which swamp shows only in part, for a failing test's log.
func (w *realSwamp) teeAgents() string {
	w.t.Helper()
	log := filepath.Join(w.dir, "agents.stderr")
	wrapper := filepath.Join(w.dir, "syncledger-tee")
	script := "#!/bin/bash\nexec 2> >(tee -a " + strconv.Quote(log) + " >&2)\nexec " + strconv.Quote(w.bin) + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		w.t.Fatal(err)
	}
	w.bin = wrapper
	return log
}

// start points the world at the server url; syncledger runs with env.
func (w *realSwamp) start(url string, env ...string) {
	w.nats = url
	w.c = &shell{t: w.t, env: cliEnv(append([]string{"SYNCLEDGER_NATS=" + w.nats, "SYNCLEDGER_LEDGER=swamp", "SYNCLEDGER_LOG_LEVEL=warn"}, env...)...)}
}

// model adds a command/shell model whose execute method runs run to the
// template (before the repos that should have it are made).
func (w *realSwamp) model(name, run string) {
	w.t.Helper()
	w.mustSwamp(w.template, "model", "create", "command/shell", name)
	p := filepath.Join(w.template, "models", "command", "shell", name+".yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		w.t.Fatal(err)
	}
	q, _ := json.Marshal(run) // a JSON string is a YAML double-quoted scalar
	s := strings.Replace(string(b), "methods: {}", "methods:\n  execute:\n    arguments:\n      run: "+string(q)+"\n", 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// repo makes host name's swamp repo (its own HOME: its own swamp state) with
// the template's models, set up on the ledger by `syncledger swamp setup`.
func (w *realSwamp) repo(name string, setupArgs ...string) string {
	w.t.Helper()
	// Hosts are checkouts of one repo: the same .swamp.yaml (repoId) and models.
	repo := w.checkout(name)
	args := append([]string{"--host", name, "swamp", "setup", "--repo", repo, "--lock-ttl-ms", "3000", "--binary", w.bin}, setupArgs...)
	w.c.ok(args...)
	for i, a := range setupArgs {
		if a == "--namespace" {
			w.ns[repo] = setupArgs[i+1]
		}
	}
	return repo
}

// cache is the syncledger cache of repo: swamp's datastore cache, or with a
// namespace its NS/ part.
func (w *realSwamp) cache(repo string) string {
	return filepath.Join(repo, ".swamp", "syncledger-cache", w.ns[repo])
}

// ledger is the ledger of repo's datastore: "swamp", or swamp_NS.
func (w *realSwamp) ledger(repo string) string {
	if ns := w.ns[repo]; ns != "" {
		return "swamp_" + ns
	}
	return "swamp"
}

// sl runs syncledger on repo's cache and ledger.
func (w *realSwamp) sl(repo string, args ...string) string {
	w.t.Helper()
	return w.c.ok(append([]string{"--ledger", w.ledger(repo), "--cache", w.cache(repo)}, args...)...)
}

// status is syncledger status of repo's cache.
func (w *realSwamp) status(repo string) cliStatus {
	w.t.Helper()
	var st cliStatus
	out := w.sl(repo, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		w.t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// run runs swamp in repo and returns its combined output and exit code.
func (w *realSwamp) run(repo string, args ...string) (string, int) {
	w.t.Helper()
	cmd := w.cmd(repo, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("swamp %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), code
}

func (w *realSwamp) cmd(repo string, args ...string) *exec.Cmd {
	if err := os.MkdirAll(repo, 0o755); err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(w.t.Context(), 5*time.Minute)
	w.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, w.swamp, args...)
	cmd.Dir = repo
	// TMPDIR too: swamp bundles extensions in it, and Deno refuses /dev/shm.
	cmd.Env = append(cliEnv(w.swampEnv...), "HOME="+repo+".home", "NO_COLOR=1", "TMPDIR="+w.dir)
	return cmd
}

func (w *realSwamp) mustSwamp(repo string, args ...string) string {
	w.t.Helper()
	out, code := w.run(repo, args...)
	if code != 0 {
		w.t.Fatalf("swamp %s in %s: exit %d\n%s", strings.Join(args, " "), repo, code, out)
	}
	return out
}

// synced checks that every repo's cache holds the same files as the others,
// with hwm == head and nothing uncommitted.
func (w *realSwamp) synced(repos ...string) {
	w.t.Helper()
	// swamp pushes what each host has, then syncledger pulls the rest (a
	// namespaced swamp rewrites its catalog export on every command).
	for _, r := range repos {
		w.mustSwamp(r, "datastore", "sync")
	}
	var first map[string]string
	for i, r := range repos {
		w.sl(r, "sync")
		st := w.status(r)
		if st.HWM != st.Head || len(st.Dirty) != 0 {
			w.t.Errorf("%s: hwm %d, head %d, dirty %q", r, st.HWM, st.Head, st.Dirty)
		}
		// What the host ignores is its own (a temp file of a swamp killed
		// mid-write, TestSwampRealKill): never published, never compared.
		files := swampTree(w.t, w.cache(r))
		for p := range files {
			if slices.ContainsFunc(st.Ignored, func(ig string) bool {
				return p == ig || strings.HasSuffix(ig, "/") && strings.HasPrefix(p, ig)
			}) {
				delete(files, p)
			}
		}
		if i == 0 {
			first = files
		} else if diff := cmp.Diff(first, files); diff != "" {
			w.t.Errorf("caches of %s and %s differ (-first +this):\n%s", repos[0], r, diff)
		}
	}
}

// swampTree is tree without swamp's local-only catalog database.
func swampTree(t *testing.T, cache string) map[string]string {
	files := tree(t, cache)
	for p := range files {
		if strings.Contains(filepath.Base(p), "_catalog.db") {
			delete(files, p)
		}
	}
	return files
}

// dataVersions returns swamp's catalog view of a model's data: name → version.
func (w *realSwamp) dataVersions(repo, model string) map[string]int {
	w.t.Helper()
	out := w.mustSwamp(repo, "data", "query", fmt.Sprintf("modelName == %q", model), "--json")
	var q struct {
		Results []struct {
			Name     string `json:"name"`
			Version  int    `json:"version"`
			IsLatest bool   `json:"isLatest"`
		} `json:"results"`
	}
	// One JSON value: the extension's lines at swamp's exit (stderr) may follow.
	if err := json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&q); err != nil {
		w.t.Fatalf("data query --json: %v\n%s", err, out)
	}
	v := map[string]int{}
	for _, r := range q.Results {
		if r.IsLatest {
			v[r.Name] = r.Version
		}
	}
	return v
}

// TestSwampReal3193 is the swamp-club#3193 sequence through the extension: a
// host that runs consumer after another host ran vpc must see vpc's output.
func TestSwampReal3193(t *testing.T) {
	w := newRealSwamp(t)
	control, writer := w.repo("control"), w.repo("writer")

	if out := w.mustSwamp(control, "datastore", "status"); !strings.Contains(out, "healthy") {
		t.Fatalf("datastore status:\n%s", out)
	}
	w.mustSwamp(control, "datastore", "sync")
	w.mustSwamp(writer, "model", "method", "run", "vpc", "execute")
	w.mustSwamp(writer, "model", "method", "run", "consumer", "execute")
	out := w.mustSwamp(control, "model", "method", "run", "consumer", "execute")
	if !strings.Contains(out, "consumer sees vpc-0abc123") {
		t.Fatalf("control's consumer did not see writer's vpc value:\n%s", out)
	}
	st := w.status(control)
	if st.HWM != st.Head || len(st.Dirty) != 0 {
		t.Fatalf("control after its run: hwm %d, head %d, dirty %q", st.HWM, st.Head, st.Dirty)
	}

	// writer runs vpc again; control's catalog shows the new version after its
	// next command pulls it.
	w.mustSwamp(writer, "model", "method", "run", "vpc", "execute")
	want := w.dataVersions(writer, "vpc")
	if want["result"] != 2 {
		t.Fatalf("writer's vpc versions %v, want result at 2", want)
	}
	w.mustSwamp(control, "datastore", "sync")
	if got := w.dataVersions(control, "vpc"); !cmp.Equal(got, want) {
		t.Fatalf("control's data query shows %v, writer's %v", got, want)
	}
	w.synced(control, writer)
}

// TestSwampRealConcurrent: two hosts run different models of one type 20 times
// each at the same time, then the same model from both hosts (serialised by
// its per-model lock). Every run succeeds, and the caches end identical.
func TestSwampRealConcurrent(t *testing.T) {
	w := newRealSwamp(t)
	a, b := w.repo("host-a"), w.repo("host-b")
	runs := func(repo, model string, n int) error {
		for i := range n {
			if out, code := w.run(repo, "model", "method", "run", model, "execute"); code != 0 {
				return fmt.Errorf("%s run %d of %s: exit %d\n%s", filepath.Base(repo), i+1, model, code, out)
			}
		}
		return nil
	}
	both := func(ma, mb string, n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); errs[0] = runs(a, ma, n) }()
		go func() { defer wg.Done(); errs[1] = runs(b, mb, n) }()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	both("vpc", "other", 20)
	t.Logf("40 concurrent runs of different models took %v", time.Since(start))
	start = time.Now()
	both("consumer", "consumer", 5)
	t.Logf("10 concurrent runs of the same model took %v", time.Since(start))
	w.synced(a, b)
	// The same model's runs were serialised: its versions are 1..10, none lost.
	if v := w.dataVersions(a, "consumer"); v["result"] != 10 {
		t.Fatalf("consumer's result is at version %d after 10 runs on two hosts: %v", v["result"], v)
	}
}

// TestSwampRealLocks: the per-model lock makes a second host wait for the
// first, and say who holds the lock and since when.
func TestSwampRealLocks(t *testing.T) {
	w := newRealSwamp(t)
	a, b := w.repo("host-a"), w.repo("host-b")
	locks := w.locks()
	key := "data/command/shell/" + modelID(t, w.template, "slow") + "/.lock"

	// Contention: b starts while a holds slow's lock, and finishes after a.
	ca := w.cmd(a, "model", "method", "run", "slow", "execute")
	var outA bytes.Buffer
	ca.Stdout, ca.Stderr = &outA, &outA
	if err := ca.Start(); err != nil {
		t.Fatal(err)
	}
	holder := w.waitHeld(locks, key, "")
	outB, code := w.run(b, "model", "method", "run", "slow", "execute")
	if err := ca.Wait(); err != nil {
		t.Fatalf("a's run: %v\n%s", err, outA.String())
	}
	if code != 0 {
		t.Fatalf("b's run (waiting for %s): exit %d\n%s", holder.Hostname, code, outB)
	}
	w.mustSwamp(a, "datastore", "sync")
	if v := w.dataVersions(a, "slow"); v["result"] != 2 {
		t.Fatalf("slow's result at version %d after a run on each host, want 2 (b waited for a's)", v["result"])
	}

	// While b waits for a lock, it says who holds it and since when.
	me := agent.LockInfo{Holder: "test@here", Hostname: "here", PID: os.Getpid(), Nonce: "test"}
	if err := locks.Acquire(t.Context(), key, me, time.Minute, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	mine := w.waitHeld(locks, key, "")
	cb := w.cmd(b, "model", "method", "run", "slow", "execute")
	pr, pw := io.Pipe()
	cb.Stdout, cb.Stderr = pw, pw
	if err := cb.Start(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("waiting for lock %s, held by test@here (host here, pid %d) since %s", key, me.PID, mine.HeldSince)
	said := make(chan string, 1)
	go func() {
		var out strings.Builder
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), want) {
				if err := locks.Release(context.Background(), key); err != nil {
					t.Error(err)
				}
			}
		}
		said <- out.String()
	}()
	err := cb.Wait()
	pw.Close()
	outB = <-said
	_ = locks.Release(t.Context(), key) // if b never said it
	if err != nil || !strings.Contains(outB, want) {
		t.Fatalf("b's run while the test held slow's lock: %v; want it to say %q:\n%s", err, want, outB)
	}
}

// locks are the locks of the world's swamp bucket.
func (w *realSwamp) locks() *agent.Locks {
	w.t.Helper()
	c, err := natsjs.Open(w.t.Context(), natsjs.Config{Write: natsjs.Endpoint{URL: w.nats}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(c.Close)
	kv, err := c.Ledger("swamp").SwampKV(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	return agent.NewLocks(w.t.Context(), kv, nil, nil) // inspects only: no fences
}

// waitHeld waits until key is held by a holder other than nonce's.
func (w *realSwamp) waitHeld(locks *agent.Locks, key, nonce string) *agent.LockInfo {
	w.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if info, err := locks.Inspect(w.t.Context(), key); err != nil {
			w.t.Fatal(err)
		} else if info != nil && info.Nonce != nonce {
			return info
		}
	}
	w.t.Fatalf("%s was never taken", key)
	return nil
}

// modelID reads a model's id from its definition in repo.
func modelID(t *testing.T, repo, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "models", "command", "shell", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^id: (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no id in %s's definition", name)
	}
	return string(m[1])
}

// TestSwampRealBadInput: a wrong server, ledger or binary gives swamp a
// message naming what to fix, and writes nothing.
func TestSwampRealBadInput(t *testing.T) {
	w := newRealSwamp(t)

	// setup refuses before writing anything.
	fresh := filepath.Join(w.dir, "fresh")
	w.mustSwamp(fresh, "repo", "init", "--tool", "none")
	before, _ := os.ReadFile(filepath.Join(fresh, ".swamp.yaml"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats", "nats://127.0.0.1:1"}, "connect to NATS"},
		{[]string{"--ledger", "nosuch"}, "nosuch"},
	} {
		r := w.c.run(append(tc.args, "swamp", "setup", "--repo", fresh)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("setup %v: exit %d, stderr %q; want a failure naming %q", tc.args, r.code, r.stderr, tc.want)
		}
		after, _ := os.ReadFile(filepath.Join(fresh, ".swamp.yaml"))
		if !bytes.Equal(before, after) {
			t.Errorf("setup %v changed .swamp.yaml", tc.args)
		}
		if _, err := os.Stat(filepath.Join(fresh, "extensions", "datastores", "syncledger.ts")); err == nil {
			t.Errorf("setup %v wrote the extension", tc.args)
		}
	}

	repo := w.repo("host")
	yml := filepath.Join(repo, ".swamp.yaml")
	good, err := os.ReadFile(yml)
	if err != nil {
		t.Fatal(err)
	}
	ext := filepath.Join(repo, "extensions", "datastores", "syncledger.ts")
	goodExt, err := os.ReadFile(ext)
	if err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(repo, swamp.HostFile)
	goodHost, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	head := w.status(repo).Head
	for _, tc := range []struct {
		name           string
		yaml, ts, host func(string) string
		want           string
	}{
		{"unreachable NATS", func(s string) string { return strings.Replace(s, "nats: "+w.nats, "nats: nats://127.0.0.1:1", 1) }, nil, nil, "cannot reach NATS"},
		{"missing ledger", func(s string) string { return strings.Replace(s, "ledger: swamp", "ledger: nosuch", 1) }, nil, nil, "syncledger init"},
		{"missing binary", nil, nil, func(s string) string {
			return strings.Replace(s, w.bin, "/nonexistent/syncledger", 1)
		}, "/nonexistent/syncledger is not found"},
		{"bad host file", nil, nil, func(s string) string { return strings.Replace(s, `"binary"`, `"binry"`, 1) }, "syncledger-host.json"},
		{"newer protocol", nil, func(s string) string {
			return regexp.MustCompile(`PROTOCOL = \d+`).ReplaceAllString(s, `PROTOCOL = 99`)
		}, nil, "install a newer syncledger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y, x, hf := string(good), string(goodExt), string(goodHost)
			if tc.yaml != nil {
				y = tc.yaml(y)
			}
			if tc.ts != nil {
				x = tc.ts(x)
			}
			if tc.host != nil {
				hf = tc.host(hf)
			}
			if y == string(good) && x == string(goodExt) && hf == string(goodHost) {
				t.Fatal("the test's edit changed nothing")
			}
			if err := os.WriteFile(hostFile, []byte(hf), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(hostFile, goodHost, 0o644)
			if err := os.WriteFile(yml, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ext, []byte(x), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(yml, good, 0o644)
			defer os.WriteFile(ext, goodExt, 0o644)
			out, code := w.run(repo, "model", "method", "run", "vpc", "execute")
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("swamp with a %s: exit %d; want a failure naming %q:\n%s", tc.name, code, tc.want, out)
			}
			if st := w.status(repo); st.Head != head {
				t.Fatalf("the ledger moved from %d to %d", head, st.Head)
			}
		})
	}
	// Put right, the same repo works.
	w.mustSwamp(repo, "model", "method", "run", "vpc", "execute")
}

// TestSwampRealConflict: a file changed by hand in a host's cache, which the
// ledger then changes too, stops that host's next swamp command with a message
// naming the file and the commands that settle it; after one of them, swamp
// runs again. A hand edit of a file swamp regenerates (a latest marker) is no
// such conflict: the ledger's version is taken (issue 25).
func TestSwampRealConflict(t *testing.T) {
	w := newRealSwamp(t)
	a, b := w.repo("host-a"), w.repo("host-b")
	notes := "notes/team.txt" // a file of the datastore that swamp does not write
	write := func(repo, rel, content string) {
		t.Helper()
		p := filepath.Join(w.cache(repo), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	write(a, notes, "first\n")
	w.sl(a, "commit", "-m", "notes")
	w.mustSwamp(b, "datastore", "sync")
	latest := "data/command/shell/" + modelID(t, w.template, "vpc") + "/result/latest"
	write(b, latest, "edited by hand\n")
	write(b, notes, "edited by hand on b\n")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	write(a, notes, "edited on a\n")
	w.sl(a, "commit", "-m", "notes")
	out, code := w.run(b, "model", "method", "run", "vpc", "execute")
	theirs := regexp.MustCompile(`syncledger --nats \S+ --ledger swamp --cache \S+ resolve --theirs \S+`).FindString(out)
	if code == 0 || !strings.Contains(out, notes) || theirs == "" {
		t.Fatalf("b's run over a hand-edited %s: exit %d; want a failure naming it and its resolve commands:\n%s", notes, code, out)
	}
	if strings.Contains(out, latest) {
		t.Fatalf("b's run names the latest marker swamp regenerates as a conflict:\n%s", out)
	}
	t.Logf("swamp on b: %s", regexp.MustCompile(`syncledger: files changed here[^\n]*`).FindString(out))
	args := strings.Fields(theirs)[1:]
	if r := cli(t, cliEnv(), args...); r.code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", theirs, r.code, r.stdout, r.stderr)
	}
	w.mustSwamp(b, "model", "method", "run", "vpc", "execute")
	if v := w.dataVersions(b, "vpc"); v["result"] != 3 {
		t.Fatalf("b's vpc versions %v after three runs, want result at 3", v)
	}
	w.synced(a, b)
}

// TestSwampRealNamespace: a namespace is a ledger of its own (swamp_NS).
// Two hosts of namespace ci run the #3193 sequence on ledger swamp_ci, and
// the base ledger gets no event. A repo of namespace prod (another repoId,
// ledger swamp_prod) pulls ci's catalog (swamp datastore catalog pull:
// pullForeignCatalogs) and reads ci's data through it (swamp data query:
// fetchForeignContent), read only: ci's ledger is unchanged and prod's cache
// holds none of ci's files. A third repo cannot take namespace ci over.
func TestSwampRealNamespace(t *testing.T) {
	w := newRealSwamp(t)
	control, writer := w.repo("control", "--namespace", "ci"), w.repo("writer", "--namespace", "ci")
	w.mustSwamp(control, "datastore", "sync")
	w.mustSwamp(writer, "model", "method", "run", "vpc", "execute")
	out := w.mustSwamp(control, "model", "method", "run", "consumer", "execute")
	if !strings.Contains(out, "consumer sees vpc-0abc123") {
		t.Fatalf("control's consumer did not see writer's vpc value:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(w.cache(control), "data", "command", "shell")); err != nil {
		t.Fatalf("no data in control's cache of namespace ci: %v", err)
	}
	w.synced(control, writer)
	ciHead := w.status(control).Head
	if ciHead == 0 {
		t.Fatal("ledger swamp_ci has no commit")
	}
	nc := natsjstest.Connect(t, w.nats)
	baseLog, err := natsjs.OpenLog(t.Context(), nc, "swamp")
	if err != nil {
		t.Fatal(err)
	}
	if head, err := baseLog.LastSeq(t.Context()); err != nil || head != 0 {
		t.Fatalf("the base ledger holds %d events (%v), want none: namespace ci's commits go to swamp_ci", head, err)
	}

	// Another repo, namespace prod: its own ledger; ci's, read only.
	prod := filepath.Join(w.dir, "prod")
	w.mustSwamp(prod, "repo", "init", "--tool", "none")
	if out, err := exec.Command("cp", "-rT", filepath.Join(w.template, "models"), filepath.Join(prod, "models")).CombinedOutput(); err != nil {
		t.Fatalf("copy models: %v %s", err, out)
	}
	w.c.ok("--host", "prod", "swamp", "setup", "--repo", prod, "--namespace", "prod", "--lock-ttl-ms", "3000", "--binary", w.bin)
	w.ns[prod] = "prod"
	w.mustSwamp(prod, "model", "method", "run", "other", "execute")
	out = w.mustSwamp(prod, "datastore", "catalog", "pull", "--namespaces", "ci,nosuch", "--json")
	var pulled struct {
		Pulled []struct {
			Namespace string `json:"namespace"`
			Rows      int    `json:"rows"`
		} `json:"pulled"`
		Skipped []string `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &pulled); err != nil {
		t.Fatalf("catalog pull --json: %v\n%s", err, out)
	}
	if len(pulled.Pulled) != 1 || pulled.Pulled[0].Namespace != "ci" || pulled.Pulled[0].Rows == 0 || !slices.Equal(pulled.Skipped, []string{"nosuch"}) {
		t.Fatalf("prod's catalog pull of ci: %+v; want ci's rows, nosuch skipped\n%s", pulled, out)
	}
	t.Logf("prod pulled %d catalog rows of namespace ci", pulled.Pulled[0].Rows)
	// ci's vpc result, whose content prod does not hold: fetched from ci's
	// ledger (the agent's requests, traced from outside it by this test
	// binary between swamp and the agent, show the request).
	trace := filepath.Join(w.dir, "prod-trace.jsonl")
	q := w.cmd(prod, "data", "query", `modelName == "vpc" && name == "result"`, "--json")
	self, err := agenttrace.Self(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	q.Env = append(q.Env, agenttrace.Env(self, w.bin, trace)...)
	qout, err := q.CombinedOutput()
	if err != nil || !strings.Contains(string(qout), "vpc-0abc123") {
		t.Fatalf("prod's query of ci's vpc result (%v) lacks its content:\n%s", err, qout)
	}
	if tr, _ := os.ReadFile(trace); !strings.Contains(string(tr), `"op":"foreign.content","at"`) || strings.Contains(string(tr), `"ok":false`) {
		t.Fatalf("prod's query did not read ci's content through fetchForeignContent; agent trace:\n%s", tr)
	}
	if head := w.status(control).Head; head != ciHead {
		t.Fatalf("prod's reads moved ledger swamp_ci from %d to %d", ciHead, head)
	}
	prodFiles := swampTree(t, w.cache(prod))
	for p := range prodFiles {
		if strings.Contains(p, modelID(t, w.template, "vpc")) {
			t.Fatalf("prod's cache holds ci's file %s", p)
		}
	}
	if len(prodFiles) == 0 {
		t.Fatal("prod's cache is empty: its own run was not synced")
	}

	other := filepath.Join(w.dir, "other")
	w.mustSwamp(other, "repo", "init", "--tool", "none") // its own repoId
	before, _ := os.ReadFile(filepath.Join(other, ".swamp.yaml"))
	r := w.c.run("swamp", "setup", "--repo", other, "--namespace", "ci", "--binary", w.bin)
	if r.code == 0 || !strings.Contains(r.stderr, "belongs to repo") {
		t.Fatalf("another repo set up namespace ci: exit %d\n%s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(other, ".swamp.yaml")); !bytes.Equal(before, after) {
		t.Fatal("a refused setup changed .swamp.yaml")
	}
}

// TestSwampRealLazy: a host set up with --lazy holds data/**/raw as metadata
// only until a command needs it; its consumer run still reads vpc's value
// (swamp reads it through an expression, without asking hydrateFile).
func TestSwampRealLazy(t *testing.T) {
	w := newRealSwamp(t)
	writer := w.repo("writer")
	w.mustSwamp(writer, "model", "method", "run", "vpc", "execute")
	control := w.repo("control", "--lazy")
	var st struct {
		Lazy uint64 `json:"lazy"`
	}
	if err := json.Unmarshal([]byte(w.sl(control, "status", "--json")), &st); err != nil || st.Lazy == 0 {
		t.Fatalf("after a lazy setup: %d lazy files (%v), want vpc's raw files left out", st.Lazy, err)
	}
	if y, _ := os.ReadFile(filepath.Join(control, ".swamp.yaml")); !strings.Contains(string(y), "hydrationStrategy: lazy") {
		t.Fatalf(".swamp.yaml has no lazy hydration:\n%s", y)
	}
	out := w.mustSwamp(control, "model", "method", "run", "consumer", "execute")
	if !strings.Contains(out, "consumer sees vpc-0abc123") {
		t.Fatalf("lazy control's consumer did not see writer's vpc value:\n%s", out)
	}
	w.synced(control, writer)
}

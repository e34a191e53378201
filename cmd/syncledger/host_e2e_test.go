package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/gcstest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// shell runs the binary against one ledger with a fixed environment.
type shell struct {
	t   *testing.T
	env []string
}

func (c *shell) run(args ...string) result {
	c.t.Helper()
	return cli(c.t, c.env, args...)
}

func (c *shell) runEnv(extra []string, args ...string) result {
	c.t.Helper()
	return cli(c.t, append(append([]string{}, c.env...), extra...), args...)
}

// ok runs and fails the test unless the command exits 0.
func (c *shell) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("syncledger %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

type cliStatus struct {
	Ledger     string `json:"ledger"`
	Head       uint64 `json:"head"`
	HWM        uint64 `json:"hwm"`
	Behind     uint64 `json:"behind"`
	Partitions map[string]struct {
		ModelSeq uint64 `json:"modelSeq"`
		Seq      uint64 `json:"seq"`
	} `json:"partitions"`
	Dirty   []string `json:"dirty"`
	Lazy    uint64   `json:"lazy"`
	Ignored []string `json:"ignored"` // directories end in /
}

func (c *shell) status(cache string) cliStatus {
	c.t.Helper()
	var st cliStatus
	out := c.ok("--cache", cache, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		c.t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// newCLI starts an embedded NATS server and returns a cli pointed at it.
func newCLI(t *testing.T, ledgerName string) *shell {
	t.Helper()
	srv, _ := natsjstest.RunServer(t)
	return &shell{t: t, env: cliEnv(
		"SYNCLEDGER_NATS="+srv.ClientURL(),
		"SYNCLEDGER_LEDGER="+ledgerName,
		"SYNCLEDGER_LOG_LEVEL=warn",
	)}
}

func put(t *testing.T, cache, rel, content string) {
	t.Helper()
	p := filepath.Join(cache, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree returns every synced file under a cache with its content.
func tree(t *testing.T, cache string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(cache, p)
		if rel == ledger.StateDir {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// blobBackends returns, for each blob backend, the URL of a fresh store and the
// environment the CLI needs to reach it. S3 runs in this test process, GCS in a
// fake-gcs-server process (gcstest); both speak HTTP on loopback to the CLI
// processes.
func blobBackends(t *testing.T) map[string]func(t *testing.T) (string, []string) {
	return map[string]func(t *testing.T) (string, []string){
		"file": func(t *testing.T) (string, []string) {
			return "file://" + t.TempDir(), nil
		},
		"s3": func(t *testing.T) (string, []string) {
			mem := s3mem.New()
			if err := mem.CreateBucket("ledger"); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
			t.Cleanup(srv.Close)
			return "s3://ledger/blobs?endpoint=" + srv.URL + "&region=us-east-1&path-style=true",
				[]string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true"}
		},
		"gcs": func(t *testing.T) (string, []string) {
			srv := gcstest.Start(t)
			srv.CreateBucket(t, "ledger")
			return "gs://ledger/blobs", []string{"STORAGE_EMULATOR_HOST=" + srv.URL()}
		},
		"natsblob": func(t *testing.T) (string, []string) {
			return "nats://syncledger-blobs", nil
		},
	}
}

// TestSeedScenarioCLI is swamp-club#3193 end to end through the binary, on every
// blob backend: a scoped sync followed by a no-op commit (or an own commit) must
// leave hwm < head; a plain sync then pulls the other model and hwm == head.
func TestSeedScenarioCLI(t *testing.T) {
	t.Parallel()
	for name, backend := range blobBackends(t) {
		for _, own := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/own-commit=%v", name, own), func(t *testing.T) {
				t.Parallel()
				c := newCLI(t, "seed")
				url, env := backend(t)
				c.env = append(c.env, env...)
				c.ok("init", "--blobs", url)
				control, writer := t.TempDir(), t.TempDir()
				hc := []string{"--cache", control, "--host", "control"}
				hw := []string{"--cache", writer, "--host", "writer"}

				c.ok(append(hc, "sync")...)
				put(t, writer, "data/command/shell/vpc/result/1/raw", "vpc-id: vpc-0abc")
				put(t, writer, "data/command/shell/vpc/result/1/metadata.yaml", "version: 1")
				c.ok(append(hw, "commit", "-m", "model method run vpc execute")...)
				put(t, writer, "data/command/shell/consumer/result/1/raw", "consumed vpc-0abc")
				c.ok(append(hw, "commit", "-m", "model method run consumer execute")...)

				out := c.ok(append(hc, "sync", "--model", "command/shell:consumer")...)
				if !strings.Contains(out, "data/command/shell/consumer/result/1/raw") {
					t.Fatalf("scoped sync did not report what it pulled:\n%s", out)
				}
				if own {
					put(t, control, "data/command/shell/consumer/result/2/raw", "control's run")
					if out := c.ok(append(hc, "commit", "-m", "control run")...); !strings.Contains(out, "committed") {
						t.Fatalf("own commit: %s", out)
					}
				} else if out := c.ok(append(hc, "commit")...); !strings.Contains(out, "nothing to commit") {
					t.Fatalf("no-op commit: %s", out)
				}
				st := c.status(control)
				if st.HWM >= st.Head {
					t.Fatalf("hwm %d, head %d: control claims commits it never read (#3193)", st.HWM, st.Head)
				}
				if _, ok := tree(t, control)["data/command/shell/vpc/result/1/raw"]; ok {
					t.Fatal("vpc present before a full sync")
				}
				out = c.ok(append(hc, "sync")...)
				if !strings.Contains(out, "data/command/shell/vpc/result/1/raw") {
					t.Fatalf("full sync did not pull vpc:\n%s", out)
				}
				st = c.status(control)
				if st.HWM != st.Head || st.Behind != 0 {
					t.Fatalf("after a full sync: hwm %d, head %d", st.HWM, st.Head)
				}
				c.ok(append(hw, "sync")...)
				if diff := cmp.Diff(tree(t, writer), tree(t, control)); diff != "" {
					t.Fatalf("caches differ (-writer +control):\n%s", diff)
				}
			})
		}
	}
}

func TestCommitConflictExitCode(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "conflict")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "audit/x", "1")
	c.ok("--cache", a, "commit")
	c.ok("--cache", b, "sync")
	put(t, a, "audit/x", "from a")
	c.ok("--cache", a, "commit")
	put(t, b, "audit/x", "from b")
	r := c.run("--cache", b, "commit")
	if r.code != 3 || !strings.Contains(r.stderr, "audit/x") {
		t.Fatalf("conflicting commit: exit %d, stderr %q; want 3 naming audit/x", r.code, r.stderr)
	}
	if got := tree(t, b)["audit/x"]; got != "from b" {
		t.Fatalf("local file lost: %q", got)
	}
	if st := c.status(b); len(st.Dirty) != 1 || st.Dirty[0] != "audit/x" {
		t.Fatalf("dirty %v", st.Dirty)
	}
}

func TestExecPassesExitCode(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "exec")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	r := c.run("--cache", a, "exec", "--", "sh", "-c", `mkdir -p "$SYNCLEDGER_CACHE/audit" && echo run > "$SYNCLEDGER_CACHE/audit/run.log"; exit 7`)
	if r.code != 7 {
		t.Fatalf("exec exit %d, want 7 (stderr %s)", r.code, r.stderr)
	}
	c.ok("--cache", b, "sync")
	if got := tree(t, b)["audit/run.log"]; got != "run\n" {
		t.Fatalf("exec did not commit the command's change: %q", got)
	}
}

func TestVerifyAndLazyFetchCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "verify")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "data/t/m/d/1/raw", "raw")
	put(t, a, "data/t/m/d/1/metadata.yaml", "meta")
	c.ok("--cache", a, "commit")
	c.ok("--cache", b, "sync", "--lazy")
	if st := c.status(b); st.Lazy != 1 {
		t.Fatalf("lazy %d", st.Lazy)
	}
	c.ok("--cache", b, "fetch", "data/t/m/d/1/raw")
	if got := tree(t, b)["data/t/m/d/1/raw"]; got != "raw" {
		t.Fatalf("fetch: %q", got)
	}
	c.ok("--cache", b, "verify")
	// Looking at a directory that is not a cache (the default --cache is the
	// working directory) is a usage error, and does not make it one.
	notCache := t.TempDir()
	put(t, notCache, "some/file", "x")
	for _, cmd := range []string{"status", "verify"} {
		r := c.run("--cache", notCache, cmd)
		if r.code != 2 || !strings.Contains(r.stderr, "not a syncledger cache") || !strings.Contains(r.stderr, "--cache") {
			t.Fatalf("%s outside a cache: exit %d, stderr %q; want exit 2 naming --cache", cmd, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(notCache, ledger.StateDir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s outside a cache created %s: %v", cmd, ledger.StateDir, err)
		}
	}
	put(t, b, "data/t/m/d/1/metadata.yaml", "tampered")
	if r := c.run("--cache", b, "verify"); r.code != 1 || !strings.Contains(r.stdout, "altered  data/t/m/d/1/metadata.yaml") {
		t.Fatalf("verify of an altered file: exit %d\n%s", r.code, r.stdout)
	}
}

// A running `watch` does not keep other syncledger processes out of its cache:
// `commit`, `exec` and `status` on the same cache run beside it (real
// processes), and the watch goes on applying other hosts' commits.
func TestWatchBesideOtherCommandsCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "watchshare")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	remote, local := t.TempDir(), t.TempDir()
	put(t, remote, "audit/r0", "r0")
	c.ok("--cache", remote, "--host", "remote", "commit")
	w := startProc(t, c.env, "--cache", local, "--host", "local", "watch")
	w.line(t, `^applied seq 1:`)
	for i := range 3 {
		put(t, local, fmt.Sprintf("audit/l%d", i), "l")
		start := time.Now()
		c.ok("--cache", local, "--host", "local", "commit")
		c.ok("--cache", local, "--host", "local", "exec", "--", "true")
		if st := c.status(local); st.HWM != st.Head || len(st.Dirty) != 0 {
			t.Fatalf("status beside watch: %+v", st)
		}
		if took := time.Since(start); took > 8*time.Second {
			t.Fatalf("commit, exec and status beside a running watch took %v (waiting for its lock?)", took)
		}
		put(t, remote, fmt.Sprintf("audit/r%d", i+1), "r")
		c.ok("--cache", remote, "--host", "remote", "sync")
		c.ok("--cache", remote, "--host", "remote", "commit")
		w.line(t, fmt.Sprintf(`^applied seq %d:`, 2*i+3))
	}
	if code := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("watch exit %d; stderr:\n%s", code, w.stderr)
	}
	c.ok("--cache", remote, "--host", "remote", "sync")
	if diff := cmp.Diff(tree(t, remote), tree(t, local)); diff != "" {
		t.Fatalf("caches differ (-remote +local):\n%s", diff)
	}
	c.ok("--cache", local, "--host", "local", "verify")
}

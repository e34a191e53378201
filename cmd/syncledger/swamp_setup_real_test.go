package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/internal/s3test"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/swamp"
)

// checkout makes host name's checkout of the template repo (its own HOME:
// its own swamp state), not set up.
func (w *realSwamp) checkout(name string) string {
	w.t.Helper()
	repo := filepath.Join(w.dir, name)
	w.mustSwamp(repo, "repo", "init", "--tool", "none")
	for _, f := range []string{".swamp.yaml", "models", "workflows"} {
		if _, err := os.Stat(filepath.Join(w.template, f)); err != nil {
			continue // no workflows
		}
		if out, err := exec.Command("cp", "-rT", filepath.Join(w.template, f), filepath.Join(repo, f)).CombinedOutput(); err != nil {
			w.t.Fatalf("copy %s: %v %s", f, err, out)
		}
	}
	return repo
}

// ledgerHosts returns the host ids of ledger name's commits, in order.
func (w *realSwamp) ledgerHosts(name string) []string {
	w.t.Helper()
	l, err := natsjs.OpenLog(w.t.Context(), natsjstest.Connect(w.t, w.nats), name)
	if err != nil {
		w.t.Fatal(err)
	}
	head, err := l.LastSeq(w.t.Context())
	if err != nil {
		w.t.Fatal(err)
	}
	var hosts []string
	err = l.Read(w.t.Context(), 1, head, func(r ledger.Record) error {
		if r.Skip != nil {
			return nil // no commit: a lock's fence record or check
		}
		if len(hosts) == 0 || hosts[len(hosts)-1] != r.Event.Host {
			hosts = append(hosts, r.Event.Host)
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return hosts
}

// TestSwampRealSetupHosts: two hosts set up with their own caches, host ids
// and binaries — the second a later release (another version) — write the
// same .swamp.yaml and extension, and no password; the per-host settings are
// in the host file, which swamp keeps out of git (.swamp/). Both run swamp
// on the one ledger, each as itself. A password on setup's command line is
// refused, printed nowhere, written nowhere.
func TestSwampRealSetupHosts(t *testing.T) {
	w := newRealSwamp(t)
	const secret = "s3cret-pw-91"
	next := filepath.Join(w.dir, "syncledger-next")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v99.0.0-next", "-o", next, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the next release: %v\n%s", err, out)
	}
	a, b := w.checkout("alpha"), w.checkout("beta")
	pristine, _ := os.ReadFile(filepath.Join(a, ".swamp.yaml"))
	// docs/swamp.md: swamp repo init itself writes the rule that keeps the
	// host file out of git (it has no --include-gitignore; issue 39).
	if gi, err := os.ReadFile(filepath.Join(a, ".gitignore")); err != nil || !regexp.MustCompile(`(?m)^\.swamp/$`).Match(gi) {
		t.Fatalf("swamp repo init wrote no .swamp/ rule into .gitignore (docs/swamp.md says it does): %v\n%s", err, gi)
	}

	u, _ := url.Parse(w.nats)
	for _, args := range [][]string{
		{"--nats", "nats://alice:" + secret + "@" + u.Host},
		{"--nats-user", "alice", "--nats-password", secret},
	} {
		r := w.c.run(append(args, "swamp", "setup", "--repo", a, "--binary", w.bin)...)
		if r.code != 2 || strings.Contains(r.stdout+r.stderr, secret) || !strings.Contains(r.stderr, "SYNCLEDGER_NATS_") {
			t.Fatalf("setup with %s: exit %d; want a refusal naming SYNCLEDGER_NATS_*, without the password:\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
		if y, _ := os.ReadFile(filepath.Join(a, ".swamp.yaml")); !bytes.Equal(y, pristine) {
			t.Fatalf("a refused setup (%s) changed .swamp.yaml", args[0])
		}
	}

	caches := map[string]string{a: filepath.Join(w.dir, "caches", "alpha"), b: filepath.Join(w.dir, "elsewhere", "beta-cache")}
	bins := map[string]string{a: w.bin, b: next}
	for _, repo := range []string{a, b} {
		w.c.ok("--host", filepath.Base(repo), "--cache", caches[repo], "swamp", "setup", "--repo", repo, "--binary", bins[repo], "--lock-ttl-ms", "3000")
	}
	for _, f := range []string{".swamp.yaml", "extensions/datastores/syncledger.ts"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Fatalf("%s differs between the hosts (or is empty):\n%s\n---\n%s", f, x, y)
		}
	}
	if ext, _ := os.ReadFile(filepath.Join(a, "extensions/datastores/syncledger.ts")); !bytes.Equal(ext, swamp.Extension()) {
		t.Fatal("the extension written is not the binary's embedded source")
	}
	// Nothing per host, nothing secret, in what git tracks; the host file has
	// this host's settings.
	for _, repo := range []string{a, b} {
		err := filepath.Walk(repo, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			body, _ := os.ReadFile(p)
			if strings.Contains(string(body), secret) {
				t.Errorf("%s holds the password", p)
			}
			if strings.HasPrefix(rel, ".swamp/") {
				return nil
			}
			for _, s := range []string{caches[a], caches[b], w.bin, next, "alpha", "beta"} {
				if bytes.Contains(body, []byte(s)) {
					t.Errorf("%s, which git tracks, holds the per-host value %q", rel, s)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var hf swamp.HostConfig
		raw, err := os.ReadFile(filepath.Join(repo, swamp.HostFile))
		if err != nil || json.Unmarshal(raw, &hf) != nil || hf.Cache != caches[repo] || hf.Host != filepath.Base(repo) || hf.Binary != bins[repo] {
			t.Fatalf("%s: %v\n%s", swamp.HostFile, err, raw)
		}
	}

	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	out := w.mustSwamp(b, "model", "method", "run", "consumer", "execute")
	if !strings.Contains(out, "consumer sees vpc-0abc123") {
		t.Fatalf("beta's consumer did not see alpha's vpc value:\n%s", out)
	}
	for _, repo := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(caches[repo], "data", "command", "shell")); err != nil {
			t.Fatalf("%s's data is not in its cache %s: %v", filepath.Base(repo), caches[repo], err)
		}
	}
	if got := strings.Join(w.ledgerHosts("swamp"), " "); got != "alpha beta" {
		t.Fatalf("the ledger's commits are by %q, want alpha's then beta's", got)
	}
	status := w.mustSwamp(b, "datastore", "status", "--json")
	if !strings.Contains(status, `this host's mark`) || !strings.Contains(status, "up to date") {
		t.Fatalf("datastore status --json does not show the host's mark:\n%s", status)
	}
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	if status = w.mustSwamp(b, "datastore", "status", "--json"); !strings.Contains(status, "behind") {
		t.Fatalf("beta after alpha's second run: datastore status --json does not say it is behind:\n%s", status)
	}
}

// TestSwampRealSetupImport: setup over a filesystem datastore elsewhere
// (swamp datastore setup filesystem --path DIR) with runs in it imports them:
// swamp data shows them on the ledger, and the next run numbers after them.
// A second host whose local .swamp/ datastore holds runs of another model
// imports them at its setup, into the ledger the first host writes. Setup
// with --skip-import leaves a datastore's data out; importing it afterwards
// (the old datastore's path) works, and is idempotent. Then the way back out
// of docs/swamp.md: a filesystem datastore again, holding every run.
func TestSwampRealSetupImport(t *testing.T) {
	w := newRealSwamp(t)
	old := w.checkout("old")
	fsds := filepath.Join(w.dir, "fsds")
	w.mustSwamp(old, "datastore", "setup", "filesystem", "--path", fsds)
	w.mustSwamp(old, "model", "method", "run", "vpc", "execute")
	w.mustSwamp(old, "model", "method", "run", "vpc", "execute")
	if v := w.dataVersions(old, "vpc"); v["result"] != 2 {
		t.Fatalf("before setup: vpc's result at %v, want version 2", v)
	}
	before := tree(t, fsds)

	out := w.c.ok("--host", "old", "swamp", "setup", "--repo", old, "--binary", w.bin)
	if !strings.Contains(out, "imported the filesystem datastore") {
		t.Fatalf("setup over a filesystem datastore with runs did not import it:\n%s", out)
	}
	if diff := treeDiff(before, tree(t, fsds)); diff != "" {
		t.Fatalf("setup changed the old datastore:\n%s", diff)
	}
	if v := w.dataVersions(old, "vpc"); v["result"] != 2 {
		t.Fatalf("after setup: swamp shows vpc's result at %v, want the imported version 2", v)
	}
	w.mustSwamp(old, "model", "method", "run", "vpc", "execute")
	if v := w.dataVersions(old, "vpc"); v["result"] != 3 {
		t.Fatalf("a run after setup: vpc's result at %v, want version 3", v)
	}

	// A second host with runs of its own in its local datastore.
	local := w.checkout("local")
	w.mustSwamp(local, "model", "method", "run", "other", "execute")
	w.c.ok("--host", "local", "swamp", "setup", "--repo", local, "--binary", w.bin)
	w.mustSwamp(local, "datastore", "sync")
	if v := w.dataVersions(local, "other"); v["result"] != 1 {
		t.Fatalf("local's own run, imported at its setup: other's result at %v", v)
	}
	if v := w.dataVersions(local, "vpc"); v["result"] != 3 {
		t.Fatalf("local sees vpc's result at %v, want old's version 3", v)
	}

	// --skip-import, runs, then the import of the old datastore.
	late := w.checkout("late")
	lateDS := filepath.Join(w.dir, "late-fsds")
	w.mustSwamp(late, "datastore", "setup", "filesystem", "--path", lateDS)
	w.mustSwamp(late, "model", "method", "run", "slow", "execute")
	w.c.ok("--ledger", "late", "init", "--blobs", fileURL(filepath.Join(w.dir, "late-blobs")))
	w.c.ok("--ledger", "late", "--host", "late", "swamp", "setup", "--repo", late, "--binary", w.bin, "--skip-import")
	w.mustSwamp(late, "model", "method", "run", "other", "execute")
	if v := w.dataVersions(late, "slow"); len(v) != 0 {
		t.Fatalf("setup --skip-import: slow's data %v is in the ledger", v)
	}
	for range 2 { // the second run has nothing to do
		w.c.ok("--ledger", "late", "--host", "late", "swamp", "import", "--filesystem", lateDS)
	}
	w.mustSwamp(late, "datastore", "sync")
	if v := w.dataVersions(late, "slow"); v["result"] != 1 {
		t.Fatalf("after the import: slow's result at %v, want version 1", v)
	}
	if v := w.dataVersions(late, "other"); v["result"] != 1 {
		t.Fatalf("after the import: other's result at %v, want the run after setup kept", v)
	}

	// The way back out (docs/swamp.md): a filesystem datastore again.
	back := filepath.Join(w.dir, "back")
	w.mustSwamp(old, "datastore", "sync")
	w.mustSwamp(old, "datastore", "setup", "filesystem", "--path", back)
	if y, _ := os.ReadFile(filepath.Join(old, ".swamp.yaml")); !strings.Contains(string(y), "type: filesystem") {
		t.Fatalf("after the way back out, .swamp.yaml:\n%s", y)
	}
	if v := w.dataVersions(old, "vpc"); v["result"] != 3 {
		t.Fatalf("back on a filesystem datastore: vpc's result at %v, want version 3", v)
	}
	if v := w.dataVersions(old, "other"); v["result"] != 1 {
		t.Fatalf("back on a filesystem datastore: local's run of other is missing: %v", v)
	}
	w.mustSwamp(old, "model", "method", "run", "vpc", "execute")
	if _, err := os.Stat(filepath.Join(back, "data", "command", "shell", modelID(t, w.template, "vpc"), "result", "4")); err != nil {
		t.Fatalf("a run after the way back out is not in the filesystem datastore: %v", err)
	}
}

// treeDiff names the files of two trees that differ.
func treeDiff(a, b map[string]string) string {
	var d []string
	for p, x := range a {
		if y, ok := b[p]; !ok || x != y {
			d = append(d, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, p)
		}
	}
	return strings.Join(d, "\n")
}

// TestSwampRealS3: the way back out to S3 and the way in from it. A repo's
// runs on the ledger are mirrored into a bucket (consume swamp-mirror, swamp's
// own v2 layout); a checkout whose datastore is that bucket
// (@swamp/s3-datastore, as swamp datastore setup extension writes it) is set
// up on another ledger: without credentials setup refuses, changing nothing,
// and prints the import command; that command with credentials imports the
// runs, and setup again takes the repo to the ledger with every run. It needs
// an S3 server (scripts/versitygw.sh): SYNCLEDGER_TEST_S3_ENDPOINT.
func TestSwampRealS3(t *testing.T) {
	srv, ok := s3test.FromEnv()
	if !ok {
		t.Skip(s3test.Hint + ", to run the S3 way out and in")
	}
	endpoint, bucket := srv.Endpoint, srv.Bucket
	w := newRealSwamp(t)
	prefix := srv.Prefix(t, "wayout")
	a := w.repo("a")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")

	q := url.Values{"endpoint": {endpoint}, "region": {"us-east-1"}, "path-style": {"true"}}
	to := "s3://" + bucket + "/" + prefix + "?" + q.Encode()
	w.c.ok("consume", "swamp-mirror", "--to", to, "--once")

	b := w.checkout("b")
	yml := filepath.Join(b, ".swamp.yaml")
	marker, _ := os.ReadFile(yml)
	block := "datastore:\n  type: '@swamp/s3-datastore'\n  config:\n    bucket: " + bucket + "\n    prefix: " + prefix +
		"\n    region: us-east-1\n    endpoint: " + endpoint + "\n    forcePathStyle: true\n"
	if err := os.WriteFile(yml, append(marker, block...), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(yml)
	w.c.ok("--ledger", "back", "init", "--blobs", fileURL(filepath.Join(w.dir, "back-blobs")))

	noCreds := &shell{t: t, env: cliEnv("SYNCLEDGER_NATS="+w.nats, "SYNCLEDGER_LOG_LEVEL=warn", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=",
		"AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_CONFIG_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true")}
	r := noCreds.run("--ledger", "back", "--host", "b", "swamp", "setup", "--repo", b, "--binary", w.bin)
	printed := regexp.MustCompile(`syncledger --nats \S+ --ledger back swamp import --repo \S+`).FindString(r.stderr)
	if r.code != 5 || printed == "" || !strings.Contains(r.stderr, "Nothing in "+b+" was changed") {
		t.Fatalf("setup over a bucket it cannot read: exit %d; want 5, the import command printed:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(yml); !bytes.Equal(before, after) {
		t.Fatal("a refused setup changed .swamp.yaml")
	}
	if _, err := os.Stat(filepath.Join(b, "extensions", "datastores", "syncledger.ts")); err == nil {
		t.Fatal("a refused setup wrote the extension")
	}
	// The printed command, with credentials, then setup again.
	if r := cli(t, cliEnv(), strings.Fields(printed)[1:]...); r.code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", printed, r.code, r.stdout, r.stderr)
	}
	out := w.c.ok("--ledger", "back", "--host", "b", "swamp", "setup", "--repo", b, "--binary", w.bin)
	if !strings.Contains(out, "imported the @swamp/s3-datastore datastore") {
		t.Fatalf("setup after the import:\n%s", out)
	}
	if v := w.dataVersions(b, "vpc"); v["result"] != 2 {
		t.Fatalf("b on ledger back: vpc's result at %v, want a's version 2 (through the bucket)", v)
	}
	w.mustSwamp(b, "model", "method", "run", "vpc", "execute")
	if v := w.dataVersions(b, "vpc"); v["result"] != 3 {
		t.Fatalf("b's run: vpc's result at %v, want version 3", v)
	}
}

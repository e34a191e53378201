package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/syncledger/syncledger/projector/host"
)

// BrowserEnv gates TestDashboardInBrowser: set to 1 (as .ci/run does), the test
// must run, and a missing Chromium is a failure. Unset, the test skips: a
// headless Chromium costs seconds of CPU that `go test ./...` on two cores
// should not pay on every run. SYNCLEDGER_CHROMIUM names the browser binary
// when it is not on PATH as chromium.
const BrowserEnv = "SYNCLEDGER_TEST_BROWSER"

func chromium(t *testing.T) string {
	t.Helper()
	if os.Getenv(BrowserEnv) == "" {
		t.Skipf("the dashboard's browser test runs with %s=1 (CI sets it; it needs a Chromium: apt-get install -y chromium)", BrowserEnv)
	}
	if p := os.Getenv("SYNCLEDGER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("%s is set but no Chromium on PATH (apt-get install -y chromium, or set SYNCLEDGER_CHROMIUM)", BrowserEnv)
	return ""
}

// page is what the dashboard shows, read from the page's DOM (the text a
// person sees), not from its JSON.
type page struct {
	Version    int                          `json:"version"`
	Head       string                       `json:"head"`
	PerMinute  string                       `json:"perMinute"`
	LastMinute string                       `json:"lastMinute"`
	PartCount  string                       `json:"partCount"`
	Hosts      map[string]map[string]string `json:"hosts"`      // host → hwm, behind, lastSeen
	Partitions map[string]map[string]string `json:"partitions"` // key → modelSeq, seq
	Commits    []string                     `json:"commits"`    // data-seq, newest first
	Errors     string                       `json:"errors"`
}

const readPage = `(() => {
  const txt = (sel, root) => { const e = (root || document).querySelector(sel); return e ? e.textContent : ""; };
  const out = {version: +document.body.dataset.version, head: txt("#head"), perMinute: txt("#rate-per-minute"),
    lastMinute: txt("#rate-last-minute"), partCount: txt("#partition-count"), hosts: {}, partitions: {}, commits: [],
    errors: txt("#error") + txt("#hosts-error")};
  for (const tr of document.querySelectorAll("#hosts tbody tr"))
    out.hosts[tr.dataset.host] = {hwm: txt(".hwm", tr), behind: txt(".behind", tr), lastSeen: txt(".last-seen", tr)};
  for (const tr of document.querySelectorAll("#partitions tbody tr"))
    out.partitions[tr.dataset.partition] = {modelSeq: txt(".model-seq", tr), seq: txt(".seq", tr)};
  for (const li of document.querySelectorAll("#commits li")) out.commits.push(li.dataset.seq);
  return out;
})()`

// TestDashboardInBrowser runs serve --ui with two hosts, loads the dashboard in
// headless Chromium, checks that the figures it shows are those of
// `status --json` of both hosts, that it updates live on a new commit, and saves
// a screenshot under the test's temp dir.
func TestDashboardInBrowser(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	srv := startProc(t, cliEnv(), "serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--ui", "127.0.0.1:0")
	url := urlRE.FindString(srv.line(t, `listening on nats://`))
	uiURL := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(srv.line(t, `^\s+dashboard http://`))
	srv.line(t, `Stop with Ctrl-C`)
	env := cliEnv("SYNCLEDGER_NATS=" + url)
	caches := map[string]string{"alpha": filepath.Join(dir, "alpha"), "beta": filepath.Join(dir, "beta")}
	do := func(h string, args ...string) result {
		t.Helper()
		r := cli(t, env, append([]string{"--host", h, "--cache", caches[h]}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s %v: %+v", h, args, r)
		}
		return r
	}
	put := func(h, path, body string) { writeFile(t, filepath.Join(caches[h], path), body) }
	status := func(h string) host.Status {
		t.Helper()
		var st host.Status
		if err := json.Unmarshal([]byte(do(h, "status", "--json").stdout), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	// alpha: one commit over two models and the audit log; beta: one commit of
	// its own; both sync (and so report their heartbeats); then beta commits
	// again and syncs while alpha does not: alpha is one commit behind.
	put("alpha", "data/command/shell/vpc/result/1/raw", "vpc-0abc\n")
	put("alpha", "data/aws/ec2/vpc/abc/state/1/meta", "m\n")
	put("alpha", "audit/run-1.json", "{}\n")
	do("alpha", "commit", "-m", "vpc and audit")
	put("beta", "data/command/shell/subnet/result/1/raw", "subnet-1\n")
	do("beta", "commit", "-m", "subnet")
	do("alpha", "sync")
	do("beta", "sync")
	put("beta", "data/command/shell/vpc/result/2/raw", "vpc-0def\n")
	do("beta", "commit", "-m", "vpc again")
	do("beta", "sync")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")), chromedp.WindowSize(1280, 1000))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(uiURL)); err != nil {
		t.Fatalf("load %s in %s: %v", uiURL, browser, err)
	}

	// waitFor polls the page until it shows head with both hosts reported at
	// their current HWMs, then returns what it shows.
	waitFor := func(want map[string]host.Status) page {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			p, err := chromedp.Run(ctx, chromedp.Evaluate[page](readPage))
			if err != nil {
				t.Fatalf("read the page: %v", err)
			}
			ok := p.Head == strconv.FormatUint(uint64(want["beta"].Head), 10) && len(p.Hosts) == len(want)
			for h, st := range want {
				ok = ok && p.Hosts[h]["hwm"] == strconv.FormatUint(uint64(st.HWM), 10)
			}
			if ok {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page does not show the ledger's state after 20 s: %+v", p)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	check := func(p page, want map[string]host.Status, commits int) {
		t.Helper()
		if p.Errors != "" {
			t.Errorf("the page shows errors: %s", p.Errors)
		}
		for h, st := range want {
			if got, want := p.Hosts[h]["behind"], strconv.FormatUint(st.Behind, 10); got != want {
				t.Errorf("host %s: page shows %s behind, status --json says %s", h, got, want)
			}
			if p.Head != strconv.FormatUint(uint64(st.Head), 10) {
				t.Errorf("head: page %s, status --json of %s %d", p.Head, h, st.Head)
			}
		}
		// beta is at the head: its marks are every partition's chain head.
		marks := want["beta"].Partitions
		if p.PartCount != strconv.Itoa(len(marks)) || len(p.Partitions) != len(marks) {
			t.Errorf("page shows %s partitions (%d rows), status --json has %d", p.PartCount, len(p.Partitions), len(marks))
		}
		for k, m := range marks {
			got := p.Partitions[k]
			if got["modelSeq"] != strconv.FormatUint(m.ModelSeq, 10) || got["seq"] != strconv.FormatUint(uint64(m.Seq), 10) {
				t.Errorf("partition %s: page shows %v, status --json %+v", k, got, m)
			}
		}
		if len(p.Commits) != commits || p.Commits[0] != p.Head {
			t.Errorf("timeline %v: want %d commits, the newest at the head %s", p.Commits, commits, p.Head)
		}
		if p.LastMinute != strconv.Itoa(commits) || p.PerMinute != fmt.Sprintf("%.1f", float64(commits)/5) {
			t.Errorf("rate: page shows %s/min, %s in the last minute; want %d commits in the last minute", p.PerMinute, p.LastMinute, commits)
		}
	}

	want := map[string]host.Status{"alpha": status("alpha"), "beta": status("beta")}
	if want["alpha"].Behind != 1 || want["beta"].Behind != 0 {
		t.Fatalf("setup: alpha %d behind, beta %d; want 1 and 0", want["alpha"].Behind, want["beta"].Behind)
	}
	p := waitFor(want)
	check(p, want, 3)

	// Live: a new commit shows up without reloading the page.
	put("alpha", "audit/run-2.json", "{}\n")
	do("alpha", "sync")
	do("alpha", "commit", "-m", "live")
	do("alpha", "sync")
	do("beta", "sync")
	want = map[string]host.Status{"alpha": status("alpha"), "beta": status("beta")}
	p2 := waitFor(want)
	if p2.Version <= p.Version {
		t.Errorf("page version %d after the update, %d before", p2.Version, p.Version)
	}
	check(p2, want, 4)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG (lower: JPEG)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o600); err != nil || len(png) < 1000 {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if keep := os.Getenv("SYNCLEDGER_TEST_SCREENSHOT"); keep != "" { // a copy that outlives the test
		if err := os.WriteFile(keep, png, 0o644); err != nil {
			t.Errorf("SYNCLEDGER_TEST_SCREENSHOT: %v", err)
		}
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exit %d after SIGTERM; stderr %s", code, srv.stderr)
	}
}

// TestUICommand runs `syncledger ui` against serve: /api/state shows the
// ledger, the logs honor --log-format json, and SIGTERM stops it with exit 0.
func TestUICommand(t *testing.T) {
	t.Parallel()
	_, url, uuid := serveT(t, t.TempDir())
	p := startProc(t, cliEnv("SYNCLEDGER_NATS="+url), "--log-format", "json", "ui", "--listen", "127.0.0.1:0", "--json", "--poll", "100ms")
	var out struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(p.line(t, `^\{`)), &out); err != nil || !strings.HasPrefix(out.URL, "http://127.0.0.1:") {
		t.Fatalf("ui --json: %+v %v", out, err)
	}
	var st struct {
		Ledger string `json:"ledger"`
		UUID   string `json:"uuid"`
	}
	// The dashboard listens before it has read the ledger's settings (it
	// starts with the server down as well): its state has no uuid until then.
	for deadline := time.Now().Add(10 * time.Second); st.UUID == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(out.URL + "api/state")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("/api/state: %v", err)
		}
	}
	if st.Ledger != "default" {
		t.Errorf("/api/state: %+v", st)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("ui exit %d after SIGTERM; stderr %s", code, p.stderr)
	}
	lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] == nil {
			t.Errorf("--log-format json: stderr line %q is not a JSON record", l)
		}
	}
	if len(lines) == 0 || !strings.Contains(p.stderr.String(), `"msg":"dashboard"`) {
		t.Errorf("no dashboard log line: %s", p.stderr)
	}
	if st.UUID != uuid {
		t.Errorf("/api/state uuid %q, want %s", st.UUID, uuid)
	}
}

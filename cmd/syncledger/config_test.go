package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/embedded/embeddedtest"
)

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runIn runs one command line in-process with env and returns its output.
func runIn(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

// showJSON runs config show --json and returns its settings by key.
func showJSON(t *testing.T, env map[string]string, args ...string) map[string]setting {
	t.Helper()
	stdout, stderr, code := runIn(t, env, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	var v struct {
		File     string    `json:"file"`
		Settings []setting `json:"settings"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stdout)
	}
	out := map[string]setting{"": {Value: v.File}}
	for _, s := range v.Settings {
		out[s.Key] = s
	}
	return out
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `
ledger: fromfile
host: filehost
log-level: warn
nats-user: fileuser
nats-password: filepw
serve:
  listen: 127.0.0.1:4999
  data: /srv/data
consume:
  audit:
    model: ["command/shell:a", "command/shell:b"]
    max-deliver: 7
`)
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		ledger string
		source string
	}{
		{"file", map[string]string{"SYNCLEDGER_CONFIG": cfg}, nil, "fromfile", "file"},
		{"env over file", map[string]string{"SYNCLEDGER_CONFIG": cfg, "SYNCLEDGER_LEDGER": "fromenv"}, nil, "fromenv", "env SYNCLEDGER_LEDGER"},
		{"flag over env", map[string]string{"SYNCLEDGER_LEDGER": "fromenv"}, []string{"--config", cfg, "--ledger", "fromflag"}, "fromflag", "flag"},
		{"default file under XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": filepath.Dir(dir)}, nil, "default", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, code, msg := resolveWith(t, tc.env, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, msg)
			}
			if a.ledgerName != tc.ledger {
				t.Errorf("ledger %q, want %q", a.ledgerName, tc.ledger)
			}
			s := showJSON(t, tc.env, append(tc.args, "config", "show")...)
			if got := s["ledger"]; got.Value != tc.ledger || got.Source != tc.source {
				t.Errorf("config show ledger = %+v, want %q from %s", got, tc.ledger, tc.source)
			}
		})
	}

	// The default file: $XDG_CONFIG_HOME/syncledger/config.yaml, else ~/.config/….
	xdg := t.TempDir()
	writeConfig(t, filepath.Join(xdg, "syncledger"), "ledger: xdg\n")
	home := t.TempDir()
	writeConfig(t, filepath.Join(home, ".config", "syncledger"), "ledger: home\n")
	for env, want := range map[string]string{"XDG_CONFIG_HOME": "xdg", "HOME": "home"} {
		dirs := map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}
		a, code, msg := resolveWith(t, map[string]string{env: dirs[env]})
		if code != 0 || a.ledgerName != want {
			t.Errorf("default file via %s: ledger %q, exit %d %s; want %q", env, a.ledgerName, code, msg, want)
		}
	}

	// A command's flags from its section; repeatable flags from lists.
	env := map[string]string{"SYNCLEDGER_CONFIG": cfg, "SYNCLEDGER_LISTEN": "127.0.0.1:5000"}
	s := showJSON(t, env, "config", "show", "serve")
	if got := s["serve.listen"]; got.Value != "127.0.0.1:5000" || got.Source != "env SYNCLEDGER_LISTEN" {
		t.Errorf("serve.listen = %+v", got)
	}
	if got := s["serve.data"]; got.Value != "/srv/data" || got.Source != "file" {
		t.Errorf("serve.data = %+v", got)
	}
	s = showJSON(t, env, "config", "show")
	if got := s["consume.audit.max-deliver"]; got.Value != float64(7) || got.Source != "file" {
		t.Errorf("consume.audit.max-deliver = %+v (commands of the file are shown)", got)
	}
	if got, _ := json.Marshal(s["consume.audit.model"].Value); string(got) != `["command/shell:a","command/shell:b"]` {
		t.Errorf("consume.audit.model = %s", got)
	}
	if s[""].Value != cfg {
		t.Errorf("file = %v, want %s", s[""].Value, cfg)
	}
}

func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown key", "ledgr: x\n", "unknown key ledgr"},
		{"unknown command key", "serve:\n  lisen: x\n", "unknown key serve.lisen"},
		{"list for a value", "ledger: [a, b]\n", "ledger: want one value"},
		{"mapping for a value", "ledger: {a: b}\n", "ledger: want a value"},
		{"bad value", "log-level: loud\n", "--log-level"},
		{"bad command value", "init:\n  replicas: many\n", "init.replicas"},
		{"not YAML", "ledger: [\n", "configuration file"},
		{"config in config", "config: other.yaml\n", "config"},
		{"two ways to log in", "nats-token: t\nnats-creds: /c\n", "more than one way"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")), tc.body)
			_, stderr, code := runIn(t, map[string]string{"SYNCLEDGER_CONFIG": path}, "init", "--nats", "nats://127.0.0.1:1")
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
	_, stderr, code := runIn(t, nil, "--config", filepath.Join(dir, "missing.yaml"), "version")
	if code != exitUsage || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing --config file: exit %d, %q", code, stderr)
	}
}

// TestConfigShowRedactsSecrets sets every kind of secret through the file, the
// environment and flags, and checks config show prints none of them, in text
// or JSON, while file names stay visible.
func TestConfigShowRedactsSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds := filepath.Join(dir, "host.creds")
	credsBody := "-----BEGIN NATS USER JWT-----\neyJcredsJWTsecret\n------END NATS USER JWT------\n"
	if err := os.WriteFile(creds, []byte(credsBody), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := embeddedtest.NewNkey(t).Seed
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, []byte(seed), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		file    string
		env     map[string]string
		args    []string
		secrets []string
		visible []string
		none    bool // nothing to redact: only file names
	}{
		{name: "nats password from the file",
			file: "nats-user: u1\nnats-password: pw-in-file\n", secrets: []string{"pw-in-file"}, visible: []string{"u1"}},
		{name: "nats password from NATS_PASSWORD",
			env: map[string]string{"NATS_USER": "u2", "NATS_PASSWORD": "pw-in-env"}, secrets: []string{"pw-in-env"}},
		{name: "nats token from a flag",
			args: []string{"--nats-token", "tok-on-flag"}, secrets: []string{"tok-on-flag"}},
		{name: "nats token from the environment",
			env: map[string]string{"SYNCLEDGER_NATS_TOKEN": "tok-in-env"}, secrets: []string{"tok-in-env"}},
		{name: "inline nkey seed",
			env: map[string]string{"NATS_NKEY": seed}, secrets: []string{seed, seed[:20]}},
		{name: "nkey seed file",
			file: "nats-nkey: " + seedFile + "\n", secrets: []string{seed}, visible: []string{seedFile}, none: true},
		{name: "creds file",
			env: map[string]string{"NATS_CREDS": creds}, secrets: []string{"eyJcredsJWTsecret"}, visible: []string{creds}, none: true},
		{name: "credentials in the NATS URL",
			file: "nats: nats://urluser:urlpass@a:4222,nats://urltoken@b:4222\n", secrets: []string{"urluser", "urlpass", "urltoken"}, visible: []string{"a:4222"}},
		{name: "serve token, password and inline users",
			file: "serve:\n  token: serve-tok\n  users:\n    - {user: web-1, password: users-pw, role: host}\n    - {user: grafana, password: $2a$11$bcrypthash, role: tooling}\n",
			env:  map[string]string{"SYNCLEDGER_SERVE_PASSWORD": "serve-pw", "SYNCLEDGER_SERVE_USER": "admin"},
			args: []string{"serve"}, secrets: []string{"serve-tok", "serve-pw", "users-pw", "bcrypthash"}, visible: []string{"web-1", "grafana"}},
		{name: "webhook secret and URL",
			file: "consume:\n  webhook:\n    secret: hook-secret\n    url: https://hooks.example.com/services/T00/B00/hookpathsecret?sig=qsecret\n",
			args: []string{"consume", "webhook"}, secrets: []string{"hook-secret", "hookpathsecret", "qsecret"}, visible: []string{"hooks.example.com"}},
		{name: "webhook secret from the environment",
			env:  map[string]string{"SYNCLEDGER_WEBHOOK_SECRET": "hook-env-secret"},
			args: []string{"consume", "webhook"}, secrets: []string{"hook-env-secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tc.env {
				env[k] = v
			}
			if tc.file != "" {
				env["SYNCLEDGER_CONFIG"] = writeConfig(t, filepath.Join(t.TempDir(), "cfg"), tc.file)
			}
			flags, cmd := tc.args, []string(nil)
			if len(tc.args) > 0 && !strings.HasPrefix(tc.args[0], "-") {
				flags, cmd = nil, tc.args
			}
			for _, form := range [][]string{nil, {"--json"}} {
				args := append(append(append(append([]string{}, flags...), "config", "show"), cmd...), form...)
				stdout, stderr, code := runIn(t, env, args...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, stderr)
				}
				all := stdout + stderr
				for _, s := range tc.secrets {
					if strings.Contains(all, s) {
						t.Errorf("%v prints the secret %q:\n%s", args, s, all)
					}
				}
				if !tc.none && !strings.Contains(all, Redacted) {
					t.Errorf("%v shows nothing redacted:\n%s", args, all)
				}
				for _, v := range tc.visible {
					if !strings.Contains(all, v) {
						t.Errorf("%v does not show %q:\n%s", args, v, all)
					}
				}
			}
		})
	}
}

// TestEverySecretFlagIsRedacted walks every flag of every command: any whose
// name says it holds a secret is redacted, including flags added later.
func TestEverySecretFlagIsRedacted(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newApp(nil, nil, os.Getenv))
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			name := strings.ToLower(f.Name)
			if strings.HasSuffix(name, "-file") || !strings.Contains(name, "password") && !strings.Contains(name, "token") &&
				!strings.Contains(name, "secret") && !strings.Contains(name, "seed") {
				return
			}
			n++
			if got := redactValue(f, "hunter2"); got != Redacted {
				t.Errorf("%s --%s shows %q", c.CommandPath(), f.Name, got)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if n < 5 { // nats-password, nats-token, serve token and password, webhook secret, …
		t.Errorf("only %d secret flags found", n)
	}
}

// config show names the cache and host id a command would use: the cache found
// above the working directory, and the id the cache keeps in .syncledger/host-id,
// not the hostname that stands for it until a cache is opened.
func TestConfigShowCacheHostID(t *testing.T) {
	cache := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, ".syncledger"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := showJSON(t, nil, "--cache", cache, "config", "show")
	if got := s["host"]; !strings.HasPrefix(got.Source, "default (the cache has no id yet") {
		t.Errorf("host of a cache without an id = %+v", got)
	}
	if err := os.WriteFile(filepath.Join(cache, ".syncledger", "host-id"), []byte("web-7-a1b2c3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = showJSON(t, nil, "--cache", cache, "config", "show")
	if got := s["host"]; got.Value != "web-7-a1b2c3" || got.Source != "cache (.syncledger/host-id)" {
		t.Errorf("host = %+v, want the cache's id web-7-a1b2c3", got)
	}
	if got := s["cache"]; got.Value != cache || got.Source != "flag" {
		t.Errorf("cache = %+v", got)
	}
	s = showJSON(t, nil, "--cache", cache, "--host", "given", "config", "show")
	if got := s["host"]; got.Value != "given" || got.Source != "flag" {
		t.Errorf("host with --host = %+v", got)
	}
	t.Chdir(filepath.Join(cache, ".syncledger"))
	s = showJSON(t, nil, "config", "show")
	if got := s["cache"]; got.Value != cache || !strings.HasPrefix(got.Source, "found") {
		t.Errorf("cache found from a subdirectory = %+v, want %s", got, cache)
	}
	if got := s["host"]; got.Value != "web-7-a1b2c3" {
		t.Errorf("host in a found cache = %+v", got)
	}
}

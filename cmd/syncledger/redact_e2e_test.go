package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// hostilePasswords are passwords as generators make them, written into URLs
// unescaped: each is 4-letter fragments between the characters URLs give a
// meaning to, so that no fragment may show anywhere (a password cut at its
// first '/' into a "port" shows one).
var hostilePasswords = []string{
	"Zq9x/Wv8y?Ut7z+Sr6w",
	"Qp5v@Mn4b#Lk3c/Jh2d",
	"Gf1e,Dc0b:Az9y+Xw8v",
	`Tu7s"Rq6p\On5m%Lk4j`,
	"Ih3g?Fe2d=Cb1a&Zy0x",
}

var fragmentRE = regexp.MustCompile(`[A-Za-z0-9]{4}`)

// leaks returns the fragments of pw that out shows.
func leaks(out, pw string) []string {
	var got []string
	for _, f := range fragmentRE.FindAllString(pw, -1) {
		if strings.Contains(out, f) {
			got = append(got, f)
		}
	}
	return got
}

// TestHostilePasswordsRedactedCLI is issue 38's point 12: a password written
// unescaped in the NATS URL — every URL form: user:pass@, a token, several
// comma-separated URLs, nats://, tls://, ws://, none — never shows, in whole
// or in part, in config show (text and --json), on stderr, or in the --json
// error object of a command that cannot reach the server.
func TestHostilePasswordsRedactedCLI(t *testing.T) {
	t.Parallel()
	for _, pw := range hostilePasswords {
		for _, form := range []string{
			"nats://alice:%s@127.0.0.1:1",
			"tls://alice:%s@127.0.0.1:1",
			"ws://alice:%s@127.0.0.1:1",
			"alice:%s@127.0.0.1:1",
			"nats://%s@127.0.0.1:1",
			"nats://127.0.0.1:1,nats://alice:%s@127.0.0.1:2",
		} {
			natsURL := strings.Replace(form, "%s", pw, 1)
			env := cliEnv("SYNCLEDGER_NATS=" + natsURL)
			for _, args := range [][]string{
				{"config", "show"},
				{"config", "show", "--json"},
				{"status", "--json"},
				{"hosts"},
				{"hosts", "--json"},
				{"--log-format", "json", "log", "--json"},
			} {
				r := cli(t, env, args...)
				if f := leaks(r.stdout+r.stderr, pw); len(f) > 0 {
					t.Errorf("%s, %v: shows %q of the password:\nstdout: %s\nstderr: %s", natsURL, args, f, r.stdout, r.stderr)
				}
				if args[0] == "config" {
					if r.code != 0 || !strings.Contains(r.stdout, Redacted) {
						t.Errorf("%s, %v: exit %d, nothing redacted:\n%s%s", natsURL, args, r.code, r.stdout, r.stderr)
					}
					continue
				}
				if r.code == 0 {
					t.Errorf("%s, %v: exit 0 with no server", natsURL, args)
				}
				if slicesContains(args, "--json") {
					var obj struct {
						Error struct {
							Message string `json:"message"`
						} `json:"error"`
					}
					if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj.Error.Message == "" {
						t.Errorf("%s, %v: no --json error object (%v):\n%s", natsURL, args, err, r.stdout)
					}
				}
			}
		}
	}
}

// TestBlobURLSecretsRedactedCLI: a blob store URL with secrets in its query
// (a token, an endpoint with credentials) is refused as a usage error, text
// and --json, without showing them.
func TestBlobURLSecretsRedactedCLI(t *testing.T) {
	t.Parallel()
	for _, blobs := range []string{
		"s3://bucket/p?region=x&token=Bl0bS3cr/Tk9q",
		"s3://bucket/p?endpoint=http://key:Bl0bS3cr/Tk9q@127.0.0.1:9000",
		"gs://bucket/p?sig=Bl0bS3cr+Tk9q",
	} {
		for _, args := range [][]string{{"config", "show"}, {"config", "show", "--json"}, {"status", "--json"}} {
			r := cli(t, cliEnv("SYNCLEDGER_NATS=nats://127.0.0.1:1", "SYNCLEDGER_BLOBS="+blobs), args...)
			if f := leaks(r.stdout+r.stderr, "Bl0bS3cr Tk9q"); len(f) > 0 || r.code != exitUsage {
				t.Errorf("--blobs %s, %v: exit %d, shows %q:\n%s%s", blobs, args, r.code, f, r.stdout, r.stderr)
			}
		}
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestHostilePasswordConnects: a user whose password holds '/', '?', '#', '@',
// ',' and '+' connects with it written unescaped in the URL (nats.go is given
// it escaped), and a wrong one is refused without showing either.
func TestHostilePasswordConnects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const pw = "Zq9x/Wv8y?Ut7z#Sr6w@Qp5v,Mn4b+Lk3c"
	users := writeFile(t, filepath.Join(dir, "users.yaml"), "users:\n  - {user: ops, password: '"+pw+"', role: admin}\n")
	srv, info := serveJSON(t, cliEnv("SYNCLEDGER_SERVE_USERS="+users), "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"))
	defer srv.stop(t, syscall.SIGTERM)
	hostPort := strings.TrimPrefix(info.URL, "nats://")
	r := cli(t, cliEnv("SYNCLEDGER_NATS=nats://ops:"+pw+"@"+hostPort), "log", "--json")
	if r.code != 0 {
		t.Fatalf("log with the password unescaped in the URL: exit %d\n%s", r.code, r.stderr)
	}
	wrong := strings.Replace(pw, "Lk3c", "Hg2b", 1)
	r = cli(t, cliEnv("SYNCLEDGER_NATS=nats://ops:"+wrong+"@"+hostPort), "log", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, "credentials") {
		t.Errorf("a wrong password: exit %d\n%s", r.code, r.stderr)
	}
	if f := leaks(r.stdout+r.stderr, wrong); len(f) > 0 {
		t.Errorf("a refused connect shows %q of the password:\n%s%s", f, r.stdout, r.stderr)
	}
}

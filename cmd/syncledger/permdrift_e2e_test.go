package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// serverWithPermissions starts a nats-server configured outside serve, whose
// authorization block is perms (a rendered block whose passwords are read
// from $SYNCLEDGER_PASSWORD_<NAME>: each is set to NAME-pw here), and returns
// its URL.
func serverWithPermissions(t *testing.T, perms string) string {
	t.Helper()
	dir := t.TempDir()
	for _, u := range []string{"ADMIN", "HOST", "TOOLING"} {
		perms = strings.ReplaceAll(perms, "$SYNCLEDGER_PASSWORD_"+u, `"`+strings.ToLower(u)+`-pw"`)
	}
	conf := writeFile(t, filepath.Join(dir, "server.conf"), perms)
	return natsjstest.RunServerConfig(t, conf).ClientURL()
}

// TestPermissionDriftReported: on a server configured outside serve with the
// permissions the previous release rendered (testdata/permissions-480bfbd.conf,
// its deploy/nats/permissions/default.conf: hosts and tooling may create
// streams and consumers), status and swamp doctor, run by the host user, say
// the permissions are older than this build's, name what they let it do
// that no role below the admin may now, and name the command that renders
// them again; with the permissions this build renders, and for the admin,
// they say nothing.
func TestPermissionDriftReported(t *testing.T) {
	t.Parallel()
	old, err := os.ReadFile("testdata/permissions-480bfbd.conf")
	if err != nil {
		t.Fatal(err)
	}
	current := cli(t, cliEnv(), "config", "permissions")
	if current.code != 0 {
		t.Fatalf("config permissions: %+v", current)
	}
	remote := "file://" + swampFixture(t, "doctor/remote")
	doctor := []string{"swamp", "doctor", "--cache", swampFixture(t, "doctor/cache-healthy"), "--from", remote}
	for _, tc := range []struct {
		name, perms string
		warn        bool
	}{
		{"the previous release's", string(old), true},
		{"this build's", current.stdout, false},
	} {
		url := serverWithPermissions(t, tc.perms)
		env := func(user string) []string {
			return cliEnv("SYNCLEDGER_NATS="+url, "NATS_USER="+user, "NATS_PASSWORD="+user+"-pw", "SYNCLEDGER_HOST=web-1")
		}
		if r := cli(t, env("admin"), "init"); r.code != 0 {
			t.Fatalf("%s: init: %+v", tc.name, r)
		}
		cache := t.TempDir()
		put(t, cache, "audit/a", "a")
		if r := cli(t, env("host"), "--cache", cache, "commit", "-m", "a"); r.code != 0 {
			t.Fatalf("%s: commit: %+v", tc.name, r)
		}
		for _, who := range []string{"host", "tooling", "admin"} {
			for _, args := range [][]string{append([]string{"--cache", cache}, "status"), doctor} {
				if who == "tooling" && args[0] == "--cache" {
					continue // status is a host's
				}
				r := cli(t, env(who), args...)
				if r.code != 0 {
					t.Fatalf("%s, %s: %v: %+v", tc.name, who, args, r)
				}
				warned := strings.Contains(r.stderr, "older than this build's")
				if want := tc.warn && who != "admin"; warned != want {
					t.Errorf("%s permissions, %s runs %v: warned %v, want %v:\n%s", tc.name, who, args[len(args)-1], warned, want, r.stderr)
				}
				if warned && (!strings.Contains(r.stderr, "config permissions") ||
					who == "host" && !strings.Contains(r.stderr, "creating consumers on the ledger's stream")) {
					t.Errorf("%s permissions, %s: the warning names no way out or no cause:\n%s", tc.name, who, r.stderr)
				}
			}
		}
	}
}

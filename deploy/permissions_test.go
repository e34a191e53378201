package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
	"github.com/syncledger/syncledger/swamp/agent"
)

// permissionsFile is the shipped authorization block for the ledger "default".
const permissionsFile = "nats/permissions/default.conf"

var shippedScope = natsauth.Scope{Ledger: "default", ObjectBucket: "syncledger-default"}

var shippedUsers = []natsauth.User{
	{Name: "admin", Role: natsauth.RoleAdmin},
	{Name: "host", Role: natsauth.RoleHost},
	{Name: "tooling", Role: natsauth.RoleTooling},
}

// TestPermissionsFileIsCurrent: deploy/nats/permissions/default.conf is what
// `syncledger config permissions` prints for the ledger "default".
func TestPermissionsFileIsCurrent(t *testing.T) {
	want, err := natsauth.Render(shippedScope, shippedUsers)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(permissionsFile)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("%s is out of date; regenerate it with\n  go run ./cmd/syncledger config permissions > deploy/%s\n(-want +got):\n%s", permissionsFile, permissionsFile, d)
	}
}

// TestPermissionsFileLoads: nats-server reads the file (included from a server
// configuration, passwords from the environment) and gives each user its
// role's permissions.
func TestPermissionsFileLoads(t *testing.T) {
	for _, u := range shippedUsers {
		t.Setenv(natsauth.PasswordVar(u.Name), u.Name+"-pw")
	}
	abs, err := filepath.Abs(permissionsFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(abs, filepath.Join(dir, "permissions.conf")); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\njetstream { store_dir: \""+filepath.Join(dir, "js")+"\" }\ninclude ./permissions.conf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server does not load the permissions: %v", err)
	}
	got := map[string]*server.User{}
	for _, u := range opts.Users {
		got[u.Username] = u
	}
	for _, u := range shippedUsers {
		su := got[u.Name]
		if su == nil || su.Password != u.Name+"-pw" {
			t.Fatalf("user %s: %+v", u.Name, su)
		}
		want, err := natsauth.For(u.Role, shippedScope)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			if su.Permissions != nil {
				t.Errorf("admin has permissions %+v", su.Permissions)
			}
			continue
		}
		gotPerms := natsauth.Permissions{
			Publish:   natsauth.SubjectPermission{Allow: su.Permissions.Publish.Allow, Deny: su.Permissions.Publish.Deny},
			Subscribe: natsauth.SubjectPermission{Allow: su.Permissions.Subscribe.Allow, Deny: su.Permissions.Subscribe.Deny},
		}
		if d := cmp.Diff(*want, gotPerms); d != "" {
			t.Errorf("user %s as nats-server loads it (-want +got):\n%s", u.Name, d)
		}
	}
	// A server starts with it.
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
}

// TestPermissionNames: the swamp bucket natsauth grants (ledger/natsjs's
// name) is the one swamp/agent opens.
func TestPermissionNames(t *testing.T) {
	if natsjs.SwampBucket("x") != agent.Bucket("x") {
		t.Errorf("swamp bucket: ledger/natsjs %q, swamp/agent %q", natsjs.SwampBucket("x"), agent.Bucket("x"))
	}
}

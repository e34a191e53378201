package natsauth

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
)

// allows reports whether l lets its user publish (or subscribe to) subject.
func allows(l SubjectPermission, subject string) bool { return l.Allows(subject) }

func TestFor(t *testing.T) {
	s := Scope{Ledger: "prod", ObjectBucket: "syncledger-prod", Consumers: []string{"audit"}}
	if p, err := For(RoleAdmin, s); p != nil || err != nil {
		t.Errorf("admin: %v %v, want no restriction", p, err)
	}
	host, err := For(RoleHost, s)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := For(RoleTooling, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p       *Permissions
		subject string
		want    bool
	}{
		{host, "syncledger.prod.p.abc", true},
		{host, "syncledger.prod.p.~q", false},
		{host, "$KV.SYNCLEDGER_HOSTS_prod.h1", true},
		{host, "$KV.SYNCLEDGER_SWAMP_prod.lock", true},
		{host, "$O.syncledger-prod.C.x", true},
		{host, "$O.syncledger-prod.M.x", true},
		{host, "$O.syncledger-prod.X.x", false},
		{host, "$JS.API.DIRECT.GET.SYNCLEDGER_prod", true},
		{host, "$JS.API.DIRECT.GET.KV_SYNCLEDGER_SWAMP_prod.$KV.SYNCLEDGER_SWAMP_prod.k", true},
		{host, "$JS.API.STREAM.INFO.OBJ_syncledger-prod", true},
		{tool, "syncledger.prod.p.abc", false},
		{tool, "syncledger.prod.dlq.audit", true},
		{tool, "syncledger.prod.dlq.webhook", false},
		{tool, "$O.syncledger-prod.C.x", false},
		{tool, "$KV.SYNCLEDGER_HOSTS_prod.h1", false},
		{tool, "$KV.SYNCLEDGER_SWAMP_prod.k", false},
		{tool, "$JS.API.DIRECT.GET.KV_SYNCLEDGER_SWAMP_prod", false},
		{tool, "$JS.API.STREAM.INFO.KV_SYNCLEDGER_HOSTS_prod", true},
		// Its own durable consumer: fetch, acknowledge, info, reset; no
		// other's, and none created.
		{tool, "$JS.API.CONSUMER.MSG.NEXT.SYNCLEDGER_prod.audit", true},
		{tool, "$JS.API.CONSUMER.INFO.SYNCLEDGER_prod.audit", true},
		{tool, "$JS.API.CONSUMER.RESET.SYNCLEDGER_prod.audit", true},
		{tool, "$JS.ACK.SYNCLEDGER_prod.audit.1.2.2.1700000000.0", true},
		{tool, "$JS.API.CONSUMER.MSG.NEXT.SYNCLEDGER_prod.webhook", false},
		{tool, "$JS.API.CONSUMER.INFO.SYNCLEDGER_prod.webhook", false},
		{tool, "$JS.API.CONSUMER.RESET.SYNCLEDGER_prod.webhook", false},
		{tool, "$JS.ACK.SYNCLEDGER_prod.webhook.1.2.2.1700000000.0", false},
		{tool, "$JS.API.CONSUMER.LIST.SYNCLEDGER_prod", true},
		{tool, "$JS.API.CONSUMER.CREATE.SYNCLEDGER_prod.audit", false},
		{host, "$JS.API.CONSUMER.MSG.NEXT.SYNCLEDGER_prod.audit", false},
		{host, "$JS.ACK.SYNCLEDGER_prod.audit.1.2.2.1700000000.0", false},
		{host, Marker(), true},
		{host, "syncledger.prod.stored.abc", false},
		{tool, "syncledger.prod.stored.abc", false},
		{tool, Marker(), true},
	} {
		if got := allows(tc.p.Publish, tc.subject); got != tc.want {
			t.Errorf("%s publish %q = %v, want %v", map[bool]string{true: "host", false: "tooling"}[tc.p == host], tc.subject, got, tc.want)
		}
	}
	// No role below the admin sees a publish before the stream stores it:
	// it subscribes to the stream's republish and serve's notices, not to
	// the ledger's publish subjects (message ids, batch ids in flight).
	for _, p := range []*Permissions{host, tool} {
		for subject, want := range map[string]bool{
			"syncledger.prod.stored.abc": true, "syncledger.prod.server": true, "_INBOX.x.y": true,
			"syncledger.prod.p.abc": false, "syncledger.prod.p.~q": false, "syncledger.prod.p.>": false, "syncledger.prod.>": false,
			"syncledger.prod.dlq.audit": false, "$KV.SYNCLEDGER_SWAMP_prod.lock": false, "$JS.API.>": false, "$O.syncledger-prod.M.x": false,
		} {
			if got := allows(p.Subscribe, subject); got != want {
				t.Errorf("%v subscribe %q = %v, want %v", p == host, subject, got, want)
			}
		}
	}
	// A host scoped to its host ids writes their heartbeat keys only.
	scoped, err := For(RoleHost, Scope{Ledger: "prod", Hosts: []string{"web-1", "a.b~c"}})
	if err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]bool{
		"$KV.SYNCLEDGER_HOSTS_prod.web-1": true, "$KV.SYNCLEDGER_HOSTS_prod." + heartbeat.Key("a.b~c"): true,
		"$KV.SYNCLEDGER_HOSTS_prod.web-2": false, "$KV.SYNCLEDGER_HOSTS_prod.evil": false, "$KV.SYNCLEDGER_HOSTS_prod.web-1.x": false,
		"$KV.SYNCLEDGER_SWAMP_prod.lock": true, "syncledger.prod.p.abc": true,
	} {
		if got := allows(scoped.Publish, subject); got != want {
			t.Errorf("scoped host publish %q = %v, want %v", subject, got, want)
		}
	}
	// Nothing below the admin makes or changes a resource of the ledger:
	// no create or update of any of its streams, no consumer create, in
	// any form the API takes.
	streams := []string{"SYNCLEDGER_prod", "KV_SYNCLEDGER_HOSTS_prod", "KV_SYNCLEDGER_SWAMP_prod", "SYNCLEDGER-DLQ_prod", "OBJ_syncledger-prod", "OTHER"}
	for _, p := range []*Permissions{host, tool} {
		for _, st := range streams {
			for _, subj := range []string{
				"$JS.API.STREAM.CREATE." + st, "$JS.API.STREAM.UPDATE." + st, "$JS.API.STREAM.DELETE." + st,
				"$JS.API.STREAM.PURGE." + st, "$JS.API.STREAM.MSG.DELETE." + st, "$JS.API.STREAM.RESTORE." + st,
				"$JS.API.CONSUMER.CREATE." + st, "$JS.API.CONSUMER.CREATE." + st + ".audit", "$JS.API.CONSUMER.CREATE." + st + ".audit.syncledger.prod.p.x",
				"$JS.API.CONSUMER.DURABLE.CREATE." + st + ".audit", "$JS.API.CONSUMER.DELETE." + st + ".audit",
				"$JS.API.CONSUMER.PAUSE." + st + ".audit",
			} {
				if allows(p.Publish, subj) {
					t.Errorf("%v allows %q", p == host, subj)
				}
			}
		}
	}
	// Without an object store bucket, no object store subjects.
	p, _ := For(RoleHost, Scope{Ledger: "prod"})
	for _, a := range p.Publish.Allow {
		if strings.Contains(a, "OBJ_") || strings.HasPrefix(a, "$O.") {
			t.Errorf("host without bucket allows %q", a)
		}
	}
	// A tooling user without consumers reads no consumer's messages.
	p, _ = For(RoleTooling, Scope{Ledger: "prod"})
	for _, a := range p.Publish.Allow {
		if strings.Contains(a, "MSG.NEXT") || strings.HasPrefix(a, "$JS.ACK") || strings.Contains(a, ".dlq.") {
			t.Errorf("tooling without consumers allows %q", a)
		}
	}
	for _, bad := range []Scope{{Ledger: "a.b"}, {Ledger: ""}, {Ledger: "x", ObjectBucket: "a.b"}, {Ledger: "x", Consumers: []string{"a.b"}}, {Ledger: "x", Consumers: []string{"a", "a"}}} {
		if _, err := For(RoleHost, bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("For(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := For("root", s); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("unknown role: %v", err)
	}
}

// TestGrants: every grant says what it concerns and why, and the
// permissions are the grants (so a table generated from Grants is what the
// server enforces).
func TestGrants(t *testing.T) {
	s := Scope{Ledger: "prod", ObjectBucket: "syncledger-prod", Consumers: []string{"audit", "hook"}}
	for _, r := range []Role{RoleHost, RoleTooling} {
		g, err := Grants(r, s)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := For(r, s)
		n := 0
		for _, x := range g {
			if x.Resource == "" || x.Why == "" || x.Subject == "" || (x.Verb != Publish && x.Verb != Subscribe) || x.Deny && x.Verb != Publish {
				t.Errorf("%s: grant %+v lacks a part", r, x)
			}
			l := p.Publish
			if x.Verb == Subscribe {
				l = p.Subscribe
			}
			in := l.Allow
			if x.Deny {
				in = l.Deny
			}
			if !slices.Contains(in, x.Subject) {
				t.Errorf("%s: grant %+v not in the permissions", r, x)
			}
			n++
		}
		if total := len(p.Publish.Allow) + len(p.Publish.Deny) + len(p.Subscribe.Allow) + len(p.Subscribe.Deny); total != n {
			t.Errorf("%s: %d grants, %d subjects in the permissions", r, n, total)
		}
	}
	if g, err := Grants(RoleAdmin, s); g != nil || err != nil {
		t.Errorf("admin grants %v %v, want none", g, err)
	}
}

func TestParseUser(t *testing.T) {
	nkey := "U" + strings.Repeat("A", 55)
	for in, want := range map[string]User{
		"web-1:host":              {Name: "web-1", Role: RoleHost},
		"ops:admin":               {Name: "ops", Role: RoleAdmin},
		nkey + ":tooling":         {Nkey: nkey, Role: RoleTooling},
		"graf:tooling:audit,hook": {Name: "graf", Role: RoleTooling, Consumers: []string{"audit", "hook"}},
		"web-1:host:web-1":        {Name: "web-1", Role: RoleHost, Hosts: []string{"web-1"}},
		"ci:host:ci-a,ci.b":       {Name: "ci", Role: RoleHost, Hosts: []string{"ci-a", "ci.b"}},
	} {
		got, err := ParseUser(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseUser(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"web-1", ":host", "a:root", "a b:host", `a"b:host`, "a:admin:audit", "a:tooling:x.y", "a:tooling:", "a:host:", "a:host:x,x"} {
		if _, err := ParseUser(bad); err == nil {
			t.Errorf("ParseUser(%q) accepted", bad)
		}
	}
	if got := PasswordVar("web-1.example"); got != "SYNCLEDGER_PASSWORD_WEB_1_EXAMPLE" {
		t.Errorf("PasswordVar = %q", got)
	}
}

func TestRender(t *testing.T) {
	nkey := "U" + strings.Repeat("B", 55)
	out, err := Render(Scope{Ledger: "default"}, []User{{Name: "ops", Role: RoleAdmin}, {Name: "web-1", Role: RoleHost}, {Nkey: nkey, Role: RoleTooling}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{user: "ops", password: $SYNCLEDGER_PASSWORD_OPS}`,
		`{user: "web-1", password: $SYNCLEDGER_PASSWORD_WEB_1, permissions: $SYNCLEDGER_HOST}`,
		`{nkey: "` + nkey + `", permissions: $SYNCLEDGER_TOOLING}`,
		`"syncledger.default.p.>"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Render output lacks %s:\n%s", want, out)
		}
	}
	// A tooling user with consumers of its own has a variable of its own;
	// a variable no user names is left out (nats-server takes it for an
	// unknown field).
	out, err = Render(Scope{Ledger: "default"}, []User{{Name: "web-1", Role: RoleHost}, {Name: "graf", Role: RoleTooling, Consumers: []string{"audit"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SYNCLEDGER_TOOLING_GRAF = {", "permissions: $SYNCLEDGER_TOOLING_GRAF}", `"$JS.API.CONSUMER.MSG.NEXT.SYNCLEDGER_default.audit"`} {
		if !strings.Contains(out, want) {
			t.Errorf("Render output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SYNCLEDGER_TOOLING = {") {
		t.Errorf("Render output holds a variable no user names:\n%s", out)
	}
	// A host user given its host id has a variable of its own.
	out, err = Render(Scope{Ledger: "default"}, []User{{Name: "web-1", Role: RoleHost, Hosts: []string{"web-1"}}, {Name: "web-2", Role: RoleHost}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SYNCLEDGER_HOST_WEB_1 = {", "permissions: $SYNCLEDGER_HOST_WEB_1}", `"$KV.SYNCLEDGER_HOSTS_default.web-1"`, "SYNCLEDGER_HOST = {", `"$KV.SYNCLEDGER_HOSTS_default.>"`} {
		if !strings.Contains(out, want) {
			t.Errorf("Render output lacks %s:\n%s", want, out)
		}
	}
	if _, err := Render(Scope{Ledger: "default"}, []User{{Name: "x", Nkey: nkey, Role: RoleHost}}); err == nil {
		t.Error("a user with a name and an nkey rendered")
	}
}

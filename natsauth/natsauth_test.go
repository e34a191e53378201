package natsauth

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

func TestFor(t *testing.T) {
	s := Scope{Ledger: "prod", ObjectBucket: "syncledger-prod"}
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
		{host, "syncledger.prod.p.>", true},
		{host, "$KV.SYNCLEDGER_HOSTS_prod.>", true},
		{host, "$O.syncledger-prod.C.>", true},
		{host, "$O.syncledger-prod.M.>", true},
		{host, "$O.syncledger-prod.>", false},
		{host, "$JS.API.STREAM.PURGE.OBJ_syncledger-prod", false},
		{host, "$JS.API.DIRECT.GET.SYNCLEDGER_prod.>", true},
		{host, "$JS.API.STREAM.PURGE.SYNCLEDGER_prod", false},
		{host, "$JS.API.STREAM.CREATE.SYNCLEDGER_prod", false},
		{host, "$KV.SYNCLEDGER_SWAMP_prod.>", true},
		{host, "$JS.API.STREAM.CREATE.KV_SYNCLEDGER_SWAMP_prod", true},
		{host, "$JS.API.DIRECT.GET.KV_SYNCLEDGER_SWAMP_prod.>", true},
		// No reader holds a consumer: the host creates none, the tooling
		// role only its durables on the ledger's stream.
		{host, "$JS.API.CONSUMER.CREATE.KV_SYNCLEDGER_SWAMP_prod.>", false},
		{host, "$JS.API.CONSUMER.CREATE.SYNCLEDGER_prod.>", false},
		{host, "$JS.API.CONSUMER.DURABLE.CREATE.SYNCLEDGER_prod.>", false},
		{tool, "$JS.API.CONSUMER.CREATE.KV_SYNCLEDGER_HOSTS_prod.>", false},
		{tool, "$JS.API.CONSUMER.CREATE.SYNCLEDGER-DLQ_prod.>", false},
		{tool, "$JS.API.CONSUMER.CREATE.OBJ_syncledger-prod.>", false},
		{tool, "syncledger.prod.p.>", false},
		{tool, "syncledger.prod.dlq.>", true},
		{tool, "$JS.API.CONSUMER.CREATE.SYNCLEDGER_prod.>", true},
		{tool, "$O.syncledger-prod.>", false},
		{tool, "$KV.SYNCLEDGER_HOSTS_prod.>", false},
		{tool, "$JS.API.STREAM.CREATE.SYNCLEDGER-DLQ_prod", true},
		// Durable consumers: deleting is the admin's; the tooling role resets
		// the ledger's consumers it runs to their ack floor when they start.
		{host, "$JS.API.CONSUMER.DELETE.SYNCLEDGER_prod.>", false},
		{host, "$JS.API.CONSUMER.RESET.SYNCLEDGER_prod.>", false},
		{tool, "$JS.API.CONSUMER.DELETE.SYNCLEDGER_prod.>", false},
		{tool, "$JS.API.CONSUMER.RESET.SYNCLEDGER_prod.>", true},
		{tool, "$JS.API.CONSUMER.RESET.KV_SYNCLEDGER_HOSTS_prod.>", false},
		{tool, "$KV.SYNCLEDGER_SWAMP_prod.>", false},
		{tool, "$JS.API.DIRECT.GET.KV_SYNCLEDGER_SWAMP_prod.>", false},
		// No ordered consumer lives on a key-value bucket any more (listings
		// are direct gets): deleting one is nobody's but the admin's.
		{host, "$JS.API.CONSUMER.DELETE.KV_SYNCLEDGER_HOSTS_prod.>", false},
		{host, "$JS.API.CONSUMER.DELETE.KV_SYNCLEDGER_SWAMP_prod.>", false},
		{tool, "$JS.API.CONSUMER.DELETE.KV_SYNCLEDGER_HOSTS_prod.>", false},
		{tool, "$JS.API.CONSUMER.DELETE.KV_SYNCLEDGER_SWAMP_prod.>", false},
	} {
		got := slices.Contains(tc.p.Publish.Allow, tc.subject)
		if got != tc.want {
			t.Errorf("%v publish allows %q = %v, want %v", tc.p == host, tc.subject, got, tc.want)
		}
	}
	// The stream's republish: every role subscribes, none below admin publishes.
	for _, p := range []*Permissions{host, tool} {
		if !slices.Contains(p.Publish.Deny, "syncledger.prod.stored.>") {
			t.Errorf("%v does not deny publishing to the stream's republish", p == host)
		}
		if !slices.Contains(p.Subscribe.Allow, "syncledger.prod.>") {
			t.Errorf("%v may not subscribe to the stream's republish", p == host)
		}
	}
	for _, d := range []string{"syncledger.prod.p.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$O.>", "$KV.>"} {
		if !slices.Contains(tool.Publish.Deny, d) {
			t.Errorf("tooling does not deny %q", d)
		}
	}
	if !slices.Contains(tool.Publish.Deny, "$JS.API.CONSUMER.DELETE.SYNCLEDGER_prod.>") {
		t.Error("tooling does not deny deleting the ledger's consumers")
	}
	for _, d := range []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>", "$JS.API.STREAM.UPDATE.>",
		"$JS.API.CONSUMER.DELETE.SYNCLEDGER_prod.>", "$JS.API.CONSUMER.RESET.SYNCLEDGER_prod.>",
		"$JS.API.CONSUMER.CREATE.>", "$JS.API.CONSUMER.DURABLE.CREATE.>", "$JS.API.CONSUMER.DELETE.KV_SYNCLEDGER_HOSTS_prod.>"} {
		if !slices.Contains(host.Publish.Deny, d) {
			t.Errorf("host does not deny %q", d)
		}
	}
	// Without an object store bucket, no object store subjects.
	p, _ := For(RoleHost, Scope{Ledger: "prod"})
	for _, a := range p.Publish.Allow {
		if strings.Contains(a, "OBJ_") || strings.HasPrefix(a, "$O.") {
			t.Errorf("host without bucket allows %q", a)
		}
	}
	for _, bad := range []Scope{{Ledger: "a.b"}, {Ledger: ""}, {Ledger: "x", ObjectBucket: "a.b"}} {
		if _, err := For(RoleHost, bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("For(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := For("root", s); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("unknown role: %v", err)
	}
}

func TestParseUser(t *testing.T) {
	nkey := "U" + strings.Repeat("A", 55)
	for in, want := range map[string]User{
		"web-1:host":      {Name: "web-1", Role: RoleHost},
		"ops:admin":       {Name: "ops", Role: RoleAdmin},
		nkey + ":tooling": {Nkey: nkey, Role: RoleTooling},
	} {
		got, err := ParseUser(in)
		if err != nil || got != want {
			t.Errorf("ParseUser(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"web-1", ":host", "a:root", "a b:host", `a"b:host`} {
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
	if _, err := Render(Scope{Ledger: "default"}, []User{{Name: "x", Nkey: nkey, Role: RoleHost}}); err == nil {
		t.Error("a user with a name and an nkey rendered")
	}
}

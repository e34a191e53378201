package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// serveUser is one entry of serve's users (a --users file, or inline in the
// configuration file):
//
//   - user: web-1
//     password: s3cret          # or a bcrypt hash ($2a$…) from "nats server passwd"
//     role: host                # admin, host or tooling (natsauth)
//     hosts: [web-1]            # the host ids it beats as (--host; host only): its heartbeat key alone
//   - nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4
//     role: tooling
//     consumers: [audit]       # the durable consumers it runs (tooling only)
//
// One user per host: removing one (and a SIGHUP to serve) revokes that host
// alone.
type serveUser struct {
	User      string   `yaml:"user" json:"user,omitempty"`
	Password  string   `yaml:"password" json:"password,omitempty"`
	Nkey      string   `yaml:"nkey" json:"nkey,omitempty"`
	Role      string   `yaml:"role" json:"role"`
	Consumers []string `yaml:"consumers" json:"consumers,omitempty"`
	Hosts     []string `yaml:"hosts" json:"hosts,omitempty"`
}

// usersFlag is serve's --users: a YAML file of users, or (from the
// configuration file) the list itself.
type usersFlag struct {
	path   string
	inline []serveUser
}

var (
	_ pflag.Value    = (*usersFlag)(nil)
	_ configValuer   = (*usersFlag)(nil)
	_ redactedValuer = (*usersFlag)(nil)
)

func (u *usersFlag) String() string {
	if u.inline != nil {
		return fmt.Sprintf("(%d users inline)", len(u.inline))
	}
	return u.path
}

func (u *usersFlag) Set(s string) error { u.path, u.inline = s, nil; return nil }
func (u *usersFlag) Type() string       { return "FILE" }

// SetConfig takes a file name, or the list of users itself.
func (u *usersFlag) SetConfig(v any) error {
	switch x := v.(type) {
	case string:
		return u.Set(x)
	case []any:
		b, err := yaml.Marshal(x)
		if err != nil {
			return err
		}
		users, err := decodeUsers(b)
		if err != nil {
			return err
		}
		u.path, u.inline = "", users
		return nil
	}
	return errors.New("want a file name or a list of users")
}

// Redacted shows the file name, or the inline users without their passwords.
func (u *usersFlag) Redacted() any {
	if u.inline == nil {
		return u.path
	}
	out := make([]serveUser, len(u.inline))
	for i, s := range u.inline {
		out[i] = s
		if s.Password != "" {
			out[i].Password = Redacted
		}
	}
	return out
}

// load returns the users: the inline list, or the file's.
func (u *usersFlag) load() ([]serveUser, error) {
	if u.inline != nil || u.path == "" {
		return u.inline, nil
	}
	b, err := os.ReadFile(u.path)
	if err != nil {
		return nil, usagef("--users: %v", err)
	}
	users, err := decodeUsers(b)
	if err != nil {
		return nil, usagef("--users %s: %v", u.path, err)
	}
	return users, nil
}

// decodeUsers decodes a list of users, or a mapping {users: list}; unknown
// fields are errors.
func decodeUsers(b []byte) ([]serveUser, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	if len(n.Content) == 1 && n.Content[0].Kind == yaml.MappingNode {
		var wrap struct {
			Users []serveUser `yaml:"users"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&wrap); err != nil {
			return nil, err
		}
		return wrap.Users, nil
	}
	var users []serveUser
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&users); err != nil {
		return nil, err
	}
	return users, nil
}

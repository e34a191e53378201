package embedded

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/embedded/embeddedtest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// TestTLS serves with a certificate signed by a CA made in the test and
// requires client certificates: a client with the CA and its certificate
// commits; one without a certificate, without the CA, or with another CA is
// turned away.
func TestTLS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := embeddedtest.Certificates(t, t.TempDir())
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		TLS: TLS{CertFile: c.ServerCert, KeyFile: c.ServerKey, CAFile: c.CA, Verify: true}})
	if !strings.HasPrefix(s.ClientURL(), "tls://127.0.0.1:") {
		t.Fatalf("ClientURL %q: want tls://", s.ClientURL())
	}
	nc, err := nats.Connect(s.ClientURL(), nats.RootCAs(c.CA), nats.ClientCert(c.ClientCert, c.ClientKey))
	if err != nil {
		t.Fatalf("connect with the CA and a client certificate: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Error("the server does not require TLS")
	}
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Errorf("not a TLS connection: %v", err)
	}
	l, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "tls", Blobs: "file:///b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []ledger.Event{event(t, l.UUID(), "h", "audit/tls", ledger.Record{})}); err != nil {
		t.Fatalf("append over TLS: %v", err)
	}
	// A nats:// URL upgrades to TLS when the server requires it.
	if nc2, err := nats.Connect(strings.Replace(s.ClientURL(), "tls://", "nats://", 1), nats.RootCAs(c.CA), nats.ClientCert(c.ClientCert, c.ClientKey)); err != nil {
		t.Errorf("nats:// URL with TLS options: %v", err)
	} else {
		nc2.Close()
	}
	for name, opts := range map[string][]nats.Option{
		"no client certificate": {nats.RootCAs(c.CA)},
		"no CA":                 {nats.ClientCert(c.ClientCert, c.ClientKey)},
		"another CA":            {nats.RootCAs(c.OtherCA), nats.ClientCert(c.ClientCert, c.ClientKey)},
		"plain":                 nil,
	} {
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		}
	}
	// The in-process connection needs no certificate.
	ic, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	ic.Close()
}

func TestTLSConfigRefusals(t *testing.T) {
	t.Parallel()
	c := embeddedtest.Certificates(t, t.TempDir())
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"cert without key", Config{TLS: TLS{CertFile: c.ServerCert}}, ErrConfig},
		{"CA without cert", Config{TLS: TLS{CAFile: c.CA}}, ErrConfig},
		{"verify without CA", Config{TLS: TLS{CertFile: c.ServerCert, KeyFile: c.ServerKey, Verify: true}}, ErrConfig},
		{"missing files", Config{TLS: TLS{CertFile: "/nonexistent.pem", KeyFile: "/nonexistent-key.pem"}}, ErrConfig},
		{"TLS without verify is not authentication", Config{Listen: "0.0.0.0:0", TLS: TLS{CertFile: c.ServerCert, KeyFile: c.ServerKey}}, ErrInsecure},
		{"token and users", Config{Token: "t", Users: []User{{Name: "u", Password: "p"}}}, ErrConfig},
		{"user without password", Config{Users: []User{{Name: "u"}}}, ErrConfig},
		{"bad nkey", Config{Users: []User{{Nkey: "UNOTAKEY"}}}, ErrConfig},
		{"nkey with password", Config{Users: []User{{Nkey: embeddedtest.NewNkey(t).Public, Password: "p"}}}, ErrConfig},
		{"duplicate user", Config{User: "a", Password: "p", Users: []User{{Name: "a", Password: "q"}}}, ErrConfig},
		{"reserved user", Config{Users: []User{{Name: internalUser, Password: "q"}}}, ErrConfig},
		{"verified client certificates are authentication", Config{Listen: "0.0.0.0:0",
			TLS: TLS{CertFile: c.ServerCert, KeyFile: c.ServerKey, CAFile: c.CA, Verify: true}}, nil},
		{"users are authentication", Config{Listen: "0.0.0.0:0", Users: []User{{Name: "u", Password: "p"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.DataDir = t.TempDir()
			if cfg.Listen == "" {
				cfg.Listen = "127.0.0.1:0"
			}
			s, err := Start(cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				s.Shutdown()
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

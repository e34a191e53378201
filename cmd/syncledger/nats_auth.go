package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/ledger"
)

// secretAnnotation marks a flag whose value config show and error messages
// never print.
const secretAnnotation = "syncledger_secret"

// markSecret marks the named flags of fs as secrets.
func markSecret(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, secretAnnotation, []string{"true"}); err != nil {
			panic("markSecret: " + err.Error())
		}
	}
}

// natsAuth is how this process authenticates to NATS and secures the connection:
// the --nats-* global flags.
type natsAuth struct {
	creds, nkey, user, password, token string
	ca, cert, key                      string
}

func (n *natsAuth) addFlags(a *app, fs *pflag.FlagSet) {
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (user JWT and nkey seed)")
	fs.StringVar(&n.nkey, "nats-nkey", "", "NATS user nkey seed: a file holding it, or the seed itself (SU…)")
	fs.StringVar(&n.user, "nats-user", "", "NATS user name; without --nats-password it is sent as a token, as the nats CLI does")
	fs.StringVar(&n.password, "nats-password", "", "NATS password of --nats-user")
	fs.StringVar(&n.token, "nats-token", "", "NATS authentication token")
	fs.StringVar(&n.ca, "nats-ca", "", "PEM file of the CAs that sign the NATS server's certificate (implies TLS)")
	fs.StringVar(&n.cert, "nats-cert", "", "PEM client certificate for TLS, with --nats-key (implies TLS)")
	fs.StringVar(&n.key, "nats-key", "", "PEM private key of --nats-cert")
	a.bindEnv(fs, "nats-creds", "SYNCLEDGER_NATS_CREDS", "NATS_CREDS")
	a.bindEnv(fs, "nats-nkey", "SYNCLEDGER_NATS_NKEY", "NATS_NKEY")
	a.bindEnv(fs, "nats-user", "SYNCLEDGER_NATS_USER", "NATS_USER")
	a.bindEnv(fs, "nats-password", "SYNCLEDGER_NATS_PASSWORD", "NATS_PASSWORD")
	a.bindEnv(fs, "nats-token", "SYNCLEDGER_NATS_TOKEN")
	a.bindEnv(fs, "nats-ca", "SYNCLEDGER_NATS_CA", "NATS_CA")
	a.bindEnv(fs, "nats-cert", "SYNCLEDGER_NATS_CERT", "NATS_CERT")
	a.bindEnv(fs, "nats-key", "SYNCLEDGER_NATS_KEY", "NATS_KEY")
	markSecret(fs, "nats-password", "nats-token")
}

// isSeed reports whether s is an nkey seed given inline rather than a file name.
func isSeed(s string) bool {
	if !strings.HasPrefix(s, "S") || len(s) < 50 || strings.ContainsAny(s, "/\\. ") {
		return false
	}
	_, err := nkeys.FromSeed([]byte(s))
	return err == nil
}

// check refuses ambiguous settings: more than one way to authenticate (URL
// credentials included), a password without a user, half a client certificate.
func (n *natsAuth) check(a *app) error {
	from := func(name string) string {
		f := lookupGlobal(a, name)
		if src := a.sources[f]; src != "" {
			return "--" + name + " (" + src + ")"
		}
		return "--" + name
	}
	var ways []string
	for _, w := range []struct{ name, val string }{
		{"nats-creds", n.creds}, {"nats-nkey", n.nkey}, {"nats-user", n.user}, {"nats-token", n.token},
	} {
		if w.val != "" {
			ways = append(ways, from(w.name))
		}
	}
	if urlHasUser(a.natsURL) {
		ways = append(ways, "credentials in "+from("nats"))
	}
	switch {
	case len(ways) > 1:
		return usagef("NATS credentials are given more than one way: %s; keep one", strings.Join(ways, ", "))
	case n.password != "" && n.user == "":
		return usagef("%s without --nats-user", from("nats-password"))
	case (n.cert == "") != (n.key == ""):
		return usagef("--nats-cert and --nats-key go together")
	case n.nkey != "" && strings.HasPrefix(n.nkey, "S") && !isSeed(n.nkey) && !fileExists(n.nkey):
		return usagef("%s: neither a valid nkey seed nor a file", from("nats-nkey"))
	}
	return nil
}

func lookupGlobal(a *app, name string) *pflag.Flag { return a.globals.Lookup(name) }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func urlHasUser(raw string) bool {
	for _, one := range strings.Split(raw, ",") {
		if _, _, _, ok := splitUserinfo(one); ok {
			return true
		}
	}
	return false
}

// options returns the nats.Options for the configured credentials and TLS.
func (n *natsAuth) options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case n.creds != "":
		if _, err := os.Stat(n.creds); err != nil {
			return nil, fmt.Errorf("--nats-creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(n.creds))
	case n.nkey != "" && isSeed(n.nkey):
		kp, err := nkeys.FromSeed([]byte(n.nkey))
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	case n.nkey != "":
		o, err := nats.NkeyOptionFromSeed(n.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: %w", n.nkey, err)
		}
		opts = append(opts, o)
	case n.user != "" && n.password == "":
		opts = append(opts, nats.Token(n.user))
	case n.user != "":
		opts = append(opts, nats.UserInfo(n.user, n.password))
	case n.token != "":
		opts = append(opts, nats.Token(n.token))
	}
	if n.ca != "" {
		opts = append(opts, nats.RootCAs(n.ca))
	}
	if n.cert != "" {
		opts = append(opts, nats.ClientCert(n.cert, n.key))
	}
	return opts, nil
}

// natsAsyncError logs the errors the server reports outside any request. A
// refused publish or subscription is only reported this way; the request that
// caused it then times out.
//
// One refusal is no reason to stop: deleting a consumer, which only the admin
// may (natsauth), is what nats.go's ordered consumers and Follow send, best
// effort, to clean up after themselves; the server drops the consumer once it
// is idle anyway.
func (a *app) natsAsyncError(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"$JS.API.CONSUMER.DELETE.`) {
		a.logger.Debug("the NATS server refused a consumer cleanup", "err", err)
		return
	}
	if errors.Is(err, nats.ErrPermissionViolation) {
		a.logger.Debug("the NATS server refused an operation", "err", err)
		a.abortWith(fmt.Errorf("%w: the NATS server refused an operation: %v", ledger.ErrPermission, err))
		return
	}
	a.logger.Debug("NATS asynchronous error", "err", err)
}

// aborter ends the running command early.
type aborter struct {
	mu     sync.Mutex
	cancel context.CancelCauseFunc // the command's context
	cause  error
}

// abortWith cancels the running command's context with cause (the first one
// wins).
func (a *app) abortWith(cause error) {
	ab := a.abort
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if ab.cause == nil {
		ab.cause = cause
		if ab.cancel != nil {
			ab.cancel(cause)
		}
	}
}

// aborted returns the cause abortWith ended the command with, if any.
func (a *app) aborted() error {
	a.abort.mu.Lock()
	defer a.abort.mu.Unlock()
	return a.abort.cause
}

// connectHint says what to check after a failed connect.
func connectHint(err error) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	msg := err.Error()
	switch {
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(msg, "Authorization Violation"),
		strings.Contains(msg, "Authentication"):
		return "check the credentials: --nats-user and --nats-password, --nats-token, --nats-creds or --nats-nkey"
	case errors.As(err, &ua), errors.As(err, &hn), strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"),
		errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted):
		return "check TLS: --nats-ca for the server's certificate, --nats-cert and --nats-key if it asks for a client certificate"
	}
	return "is `syncledger serve` running? set --nats or SYNCLEDGER_NATS"
}

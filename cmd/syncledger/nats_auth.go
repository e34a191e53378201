package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
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
func isSeed(s string) bool { return natsjs.IsNkeySeed(s) }

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
	case urlHasUser(a.readNATS):
		return usagef("%s carries credentials: give them once, in --nats or the --nats-* settings; they serve both endpoints", from("read-nats"))
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

// endpoint is the NATS endpoint at url with the configured credentials and
// TLS (check has refused more than one way to authenticate).
func (n *natsAuth) endpoint(url string) natsjs.Endpoint {
	return natsjs.Endpoint{URL: url, Token: n.token, User: n.user, Password: n.password,
		CredsFile: n.creds, Nkey: n.nkey, CAFile: n.ca, CertFile: n.cert, KeyFile: n.key}
}

// settingError names the credential setting a connection could not be built
// from (a credentials or seed file that cannot be read).
func (n *natsAuth) settingError(err error) error {
	switch {
	case n.creds != "":
		return fmt.Errorf("--nats-creds: %w", err)
	case n.nkey != "":
		return fmt.Errorf("--nats-nkey: %w", err)
	}
	return err
}

// natsRefused ends the command on a refusal of the server that no operation
// claimed (natsjs.Config.Refused): the request it refused gets no answer, and
// would only wait for its timeout.
func (a *app) natsRefused(pe *ledger.PermissionError) { a.abortWith(pe) }

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
func connectHint(c natsjs.ConnectCause) string {
	switch c {
	case natsjs.ConnectAuth:
		return "check the credentials: --nats-user and --nats-password, --nats-token, --nats-creds or --nats-nkey"
	case natsjs.ConnectTLS:
		return "check TLS: --nats-ca for the server's certificate, --nats-cert and --nats-key if it asks for a client certificate"
	}
	return "is `syncledger serve` running? set --nats or SYNCLEDGER_NATS"
}

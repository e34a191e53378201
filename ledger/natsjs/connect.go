package natsjs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/syncledger/syncledger/ledger"
)

// Endpoint is where a Client connects and how it authenticates: every form
// the CLI accepts. At most one way to authenticate is given (credentials in
// URL count as one); the caller checks that, naming its own settings.
type Endpoint struct {
	// URL is a server's URL, or several separated by commas (nats:// or
	// tls://; a bare host:port is nats://). It may carry credentials
	// (nats://TOKEN@host, nats://USER:PASS@host).
	URL string

	Token     string // an authentication token
	User      string // a user name; without Password it is sent as a token, as the nats CLI does
	Password  string // User's password
	CredsFile string // a credentials file: the user's JWT and nkey seed
	Nkey      string // a user nkey seed (SU…), or a file holding one (IsNkeySeed tells them apart)

	CAFile   string // PEM CAs that sign the server's certificate (implies TLS)
	CertFile string // PEM client certificate, with KeyFile (implies TLS)
	KeyFile  string

	// InProcess, when set, is a server in this process (the embedded server's
	// Endpoint): the connection is made to it without TCP or TLS, and URL only
	// names it.
	InProcess InProcessServer
}

// InProcessServer is a NATS server running in this process.
type InProcessServer interface {
	InProcessConn() (net.Conn, error)
}

// IsNkeySeed reports whether s is an nkey seed given inline rather than the
// name of a file holding one.
func IsNkeySeed(s string) bool {
	if !strings.HasPrefix(s, "S") || len(s) < 50 || strings.ContainsAny(s, "/\\. ") {
		return false
	}
	_, err := nkeys.FromSeed([]byte(s))
	return err == nil
}

// authOptions returns the connection options of e's credentials and TLS. Its
// errors are the setting's own (a credentials file that cannot be read): the
// caller names the setting.
func (e Endpoint) authOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case e.CredsFile != "":
		if _, err := os.Stat(e.CredsFile); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(e.CredsFile))
	case e.Nkey != "" && IsNkeySeed(e.Nkey):
		kp, err := nkeys.FromSeed([]byte(e.Nkey))
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	case e.Nkey != "":
		o, err := nats.NkeyOptionFromSeed(e.Nkey)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Nkey, err)
		}
		opts = append(opts, o)
	case e.User != "" && e.Password == "":
		opts = append(opts, nats.Token(e.User))
	case e.User != "":
		opts = append(opts, nats.UserInfo(e.User, e.Password))
	case e.Token != "":
		opts = append(opts, nats.Token(e.Token))
	}
	if e.CAFile != "" {
		opts = append(opts, nats.RootCAs(e.CAFile))
	}
	if e.CertFile != "" || e.KeyFile != "" {
		if e.CertFile == "" || e.KeyFile == "" {
			return nil, fmt.Errorf("a client certificate needs both its certificate and its key file: %w", ledger.ErrInvalid)
		}
		opts = append(opts, nats.ClientCert(e.CertFile, e.KeyFile))
	}
	if e.InProcess != nil {
		opts = append(opts, nats.InProcessServer(e.InProcess))
	}
	return opts, nil
}

// ConnectCause says what to check after a failed connect.
type ConnectCause int

const (
	ConnectUnreachable ConnectCause = iota // no server answered: is it running, is the URL right?
	ConnectAuth                            // the server refused the credentials
	ConnectTLS                             // TLS failed: the server's CA, or a client certificate it asks for
)

// ConnectError is a failed connect. errors.Is(err, ledger.ErrUnreachable)
// holds, whatever the Cause: nothing was reached that could answer.
type ConnectError struct {
	Cause ConnectCause
	Err   error // the client library's error
}

func (e *ConnectError) Error() string { return "connect to NATS: " + e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ledger.ErrUnreachable) hold.
func (e *ConnectError) Is(target error) bool { return target == ledger.ErrUnreachable }

// connectCause classifies a connect error.
func connectCause(err error) ConnectCause {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	msg := err.Error()
	switch {
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(msg, "Authorization Violation"),
		strings.Contains(msg, "Authentication"):
		return ConnectAuth
	case errors.As(err, &ua), errors.As(err, &hn), strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"),
		errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted):
		return ConnectTLS
	}
	return ConnectUnreachable
}

// DefaultConnectTimeout bounds a connect when the caller's ctx has no deadline.
const DefaultConnectTimeout = 5 * time.Second

// dial connects to e: no retry of a failed first connect (a command says so
// at once), reconnects afterwards as nats.go does. handler receives the
// server's asynchronous errors.
func dial(ctx context.Context, e Endpoint, name string, timeout time.Duration, handler nats.ErrHandler) (*nats.Conn, error) {
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(timeout),
		nats.RetryOnFailedConnect(false),
		nats.ErrorHandler(handler),
	}
	auth, err := e.authOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(e.URL, append(opts, auth...)...)
	if err != nil {
		return nil, &ConnectError{Cause: connectCause(err), Err: err}
	}
	return nc, nil
}

// dialBehind connects to e without waiting: it returns at once a connection
// that connects in the background (and reconnects as nats.go does), so a
// host near its Read endpoint does not wait for a server far away before it
// reads. A request made before it connects waits for it, within its own
// timeout; a write endpoint that does not answer shows as an unreachable
// server on each operation (ErrUnreachable), not as a failed Open. Only the
// credentials' own errors (a file that cannot be read) fail it at once. An
// in-process endpoint connects at once, as dial does.
//
// down, when set, is true while the connection's last attempt to connect
// failed (nats.go's reconnect errors), false once it is connected.
func dialBehind(ctx context.Context, e Endpoint, name string, timeout time.Duration, handler nats.ErrHandler, down *atomic.Bool) (*nats.Conn, error) {
	if e.InProcess != nil {
		return dial(ctx, e, name, timeout, handler)
	}
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	if down == nil {
		down = new(atomic.Bool)
	}
	auth, err := e.authOptions()
	if err != nil {
		return nil, err
	}
	up := func(*nats.Conn) { down.Store(false) }
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(timeout),
		nats.ErrorHandler(handler),
		nats.ConnectHandler(up),
		nats.ReconnectHandler(up),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if !errors.Is(err, errDeferred) {
				down.Store(true)
			}
		}),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { down.Store(true) }),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		// The first dial is deferred (it fails at once, in this call), so
		// nats.Connect returns and the real one runs in the background,
		// at once; later attempts back off to nats.go's usual wait.
		nats.SetCustomDialer(&deferredDialer{d: net.Dialer{Timeout: timeout}, down: down}),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			if attempts <= 1 {
				return 0
			}
			return min(time.Duration(attempts)*250*time.Millisecond, nats.DefaultReconnectWait)
		}),
	}
	nc, err := nats.Connect(e.URL, append(opts, auth...)...)
	if err != nil {
		return nil, &ConnectError{Cause: connectCause(err), Err: err}
	}
	return nc, nil
}

// deferredDialer fails its first dial (see dialBehind) and dials TCP after.
// A dial after the first real one means the connection before it failed or
// was lost — a server that accepts and closes, or never answers the
// handshake, fails no dial and tells nats.go's callbacks nothing —: down is
// set then, until the connection is up (dialBehind's handlers).
type deferredDialer struct {
	d     net.Dialer
	dials atomic.Int32
	down  *atomic.Bool
}

// errDeferred is the first dial's failure: not an error anyone sees.
var errDeferred = errors.New("connect deferred to the background")

func (d *deferredDialer) Dial(network, address string) (net.Conn, error) {
	n := d.dials.Add(1)
	if n == 1 {
		return nil, errDeferred
	}
	if n > 2 {
		d.down.Store(true)
	}
	return d.d.Dial(network, address)
}

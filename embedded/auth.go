package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/syncledger/syncledger/natsauth"
)

// User is a client account of the embedded server: a name and password, or a
// public user nkey, with its permissions.
type User struct {
	Name     string
	Password string
	// Nkey is a public user nkey ("U…"), instead of Name and Password; the client
	// signs the server's nonce with the matching seed.
	Nkey string
	// Permissions restrict what the user may publish and subscribe to, typically
	// natsauth.For(role, scope); nil means no restriction (an administrator).
	Permissions *natsauth.Permissions
}

// TLS configures TLS on the client listener.
type TLS struct {
	// CertFile and KeyFile are the server's certificate chain and private key
	// (PEM). Setting them makes every TCP client connect with TLS.
	CertFile string
	KeyFile  string
	// CAFile is a PEM bundle of the authorities that sign client certificates.
	CAFile string
	// Verify requires every client to present a certificate signed by CAFile
	// (mutual TLS). It counts as authentication for a non-loopback listener.
	Verify bool
}

// enabled reports whether TLS is configured.
func (t TLS) enabled() bool { return t.CertFile != "" }

func (t TLS) validate() error {
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		return fmt.Errorf("TLS certificate and key must be set together: %w", ErrConfig)
	case t.CAFile != "" && !t.enabled():
		return fmt.Errorf("a TLS CA without a server certificate and key: %w", ErrConfig)
	case t.Verify && t.CAFile == "":
		return fmt.Errorf("verifying client certificates needs a TLS CA: %w", ErrConfig)
	}
	return nil
}

// internalUser is the name of the unrestricted user that Connect logs in as when
// Config.Users is set; its password is random, made at Start and never shown.
const internalUser = "_syncledger_serve"

// validateAuth checks the authentication settings of cfg.
func (cfg *Config) validateAuth() error {
	if (cfg.User == "") != (cfg.Password == "") {
		return fmt.Errorf("user and password must be set together: %w", ErrConfig)
	}
	if cfg.Token != "" && (cfg.User != "" || len(cfg.Users) > 0) {
		return fmt.Errorf("set a token or users, not both: %w", ErrConfig)
	}
	seen := map[string]bool{internalUser: true}
	if cfg.User != "" {
		seen[cfg.User] = true
	}
	for i, u := range cfg.Users {
		switch {
		case u.Nkey != "" && (u.Name != "" || u.Password != ""):
			return fmt.Errorf("user %d: an nkey user has no name or password: %w", i+1, ErrConfig)
		case u.Nkey != "":
			if !nkeys.IsValidPublicUserKey(u.Nkey) {
				return fmt.Errorf("user %d: %q is not a public user nkey: %w", i+1, u.Nkey, ErrConfig)
			}
			if seen[u.Nkey] {
				return fmt.Errorf("user %d: nkey %s given twice: %w", i+1, u.Nkey, ErrConfig)
			}
			seen[u.Nkey] = true
		case u.Name == "" || u.Password == "":
			return fmt.Errorf("user %d: want a name and a password, or an nkey: %w", i+1, ErrConfig)
		case seen[u.Name]:
			return fmt.Errorf("user %q given twice (or reserved): %w", u.Name, ErrConfig)
		default:
			seen[u.Name] = true
		}
	}
	return cfg.TLS.validate()
}

func (cfg *Config) authenticated() bool {
	return cfg.Token != "" || cfg.User != "" || len(cfg.Users) > 0 || cfg.TLS.Verify
}

// authOptions sets the client authentication and TLS of opts from cfg, and
// returns the password of the internal user ("" when there is none).
func (cfg *Config) authOptions(opts *server.Options) (internalPassword string, err error) {
	opts.Authorization = cfg.Token
	if len(cfg.Users) == 0 {
		opts.Username, opts.Password = cfg.User, cfg.Password
	} else {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		internalPassword = hex.EncodeToString(b[:])
		cfg.setUsers(opts, internalPassword)
	}
	if t := cfg.TLS; t.enabled() {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile, Verify: t.Verify, Timeout: 2,
		})
		if err != nil {
			return "", fmt.Errorf("TLS: %v: %w", err, ErrConfig)
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, t.Verify, 2
	}
	return internalPassword, nil
}

// setUsers sets the users of opts: the internal user, the unrestricted
// Config.User, and Config.Users with their permissions.
func (cfg *Config) setUsers(opts *server.Options, internalPassword string) {
	opts.Users = []*server.User{{Username: internalUser, Password: internalPassword}}
	opts.Nkeys = nil
	if cfg.User != "" {
		opts.Users = append(opts.Users, &server.User{Username: cfg.User, Password: cfg.Password})
	}
	for _, u := range cfg.Users {
		perms := serverPermissions(u.Permissions)
		if u.Nkey != "" {
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.Nkey, Permissions: perms})
		} else {
			opts.Users = append(opts.Users, &server.User{Username: u.Name, Password: u.Password, Permissions: perms})
		}
	}
}

// SetUsers replaces the server's users (Config.Users) while it runs: a user
// no longer listed is disconnected and refused from then on, one whose
// permissions changed has the new ones, and every other connection goes on
// untouched. It is how one host is revoked without touching the others
// (serve re-reads its users on SIGHUP). A server started without users
// cannot be given some (that is a change of how clients log in): restart it.
func (s *Server) SetUsers(users []User) error {
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	if s.internalPassword == "" {
		return fmt.Errorf("set users: the server was started without users: %w", ErrConfig)
	}
	cfg := s.cfg
	cfg.Users = users
	if err := cfg.validateAuth(); err != nil {
		return fmt.Errorf("set users: %w", err)
	}
	if len(users) == 0 {
		return fmt.Errorf("set users: no users (the server would take only its own): %w", ErrConfig)
	}
	// The options the server started with, these users in place of its
	// users (s.opts itself stays as started: the disk watch reads it).
	opts := s.opts.Clone()
	cfg.setUsers(opts, s.internalPassword)
	if err := s.ns.ReloadOptions(opts); err != nil {
		return fmt.Errorf("set users: %w", err)
	}
	// A reload gives the account back its JetStream limits: a full disk's
	// refusal of writes is put back.
	if s.disk != nil {
		if err := s.disk.reclose(); err != nil {
			return fmt.Errorf("set users: refuse writes again on the full disk: %w", err)
		}
	}
	return nil
}

func serverPermissions(p *natsauth.Permissions) *server.Permissions {
	if p == nil {
		return nil
	}
	sp := func(s natsauth.SubjectPermission) *server.SubjectPermission {
		return &server.SubjectPermission{Allow: s.Allow, Deny: s.Deny}
	}
	return &server.Permissions{Publish: sp(p.Publish), Subscribe: sp(p.Subscribe)}
}

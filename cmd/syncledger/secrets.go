package main

import (
	"bufio"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// Secrets: every form a credential can take here is hidden wherever this
// process prints: redactURL for URLs (nats://user:pass@host, a scheme-less
// user:pass@host, secret query parameters), redactValue (config.go) for flag
// values, and scrubWriter, through which everything written to stderr (logs and
// error messages) goes, for the values of every secret in effect
// (secretsInEffect), wherever they appear.

// splitUserinfo splits one URL, with or without a scheme, at its user
// information: "nats://alice:pw@h:4222" and "alice:pw@h:4222" both give
// "alice:pw". nats.go accepts both forms, and url.Parse reads the second as a
// scheme "alice".
func splitUserinfo(one string) (scheme, userinfo, rest string, ok bool) {
	one = strings.TrimSpace(one)
	scheme, after, hasScheme := strings.Cut(one, "://")
	if !hasScheme {
		scheme, after = "", one
	}
	authority, path, hasPath := strings.Cut(after, "/")
	i := strings.LastIndex(authority, "@")
	if i < 0 {
		return scheme, "", one, false
	}
	rest = authority[i+1:]
	if hasPath {
		rest += "/" + path
	}
	return scheme, authority[:i], rest, true
}

// secretParams are words that make a query parameter a secret.
var secretParams = []string{"secret", "token", "password", "key", "sig", "credential"}

// redactURL hides the credentials of each comma-separated URL in raw: its user
// information (with or without a scheme) and query parameters named like
// secrets.
func redactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, one := range parts {
		scheme, _, rest, ok := splitUserinfo(one)
		if ok {
			one = Redacted + "@" + rest
			if scheme != "" {
				one = scheme + "://" + one
			}
		}
		if base, query, hasQuery := strings.Cut(one, "?"); hasQuery {
			q, err := url.ParseQuery(query)
			if err != nil {
				one = base + "?" + Redacted
			} else {
				changed := false
				for k, vs := range q {
					switch {
					case containsAny(strings.ToLower(k), secretParams):
						q.Set(k, Redacted)
						changed = true
					case len(vs) == 1 && strings.Contains(vs[0], "@") && strings.Contains(vs[0], "://"):
						q.Set(k, redactURL(vs[0])) // an endpoint with credentials
						changed = true
					}
				}
				if changed {
					one = base + "?" + q.Encode()
				}
			}
		}
		parts[i] = one
	}
	return strings.Join(parts, ",")
}

func containsAny(s string, words []string) bool {
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s, w) })
}

// secretEnv are environment variables of the blob stores' clients that hold
// secrets.
var secretEnv = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "GOOGLE_OAUTH_ACCESS_TOKEN"}

// secretsInEffect returns the secret strings this process holds: NATS
// credentials however given (URL user information, user and password, token,
// nkey seed inline or in its file, the JWT and seed of a credentials file),
// secrets in the blob store URL and the blob stores' secret environment
// variables, and the value of every flag marked or named secret.
func (a *app) secretsInEffect() []string {
	var out []string
	add := func(s string) {
		if len(strings.TrimSpace(s)) >= 4 {
			out = append(out, strings.TrimSpace(s))
		}
	}
	var fromURL func(raw string)
	fromURL = func(raw string) {
		for _, one := range strings.Split(raw, ",") {
			if _, ui, _, ok := splitUserinfo(one); ok {
				add(ui)
				user, pass, hasPass := strings.Cut(ui, ":")
				if !hasPass {
					pass = user // a token; a user name beside a password is no secret
				}
				add(pass)
				if u, err := url.PathUnescape(pass); err == nil {
					add(u)
				}
			}
			if _, query, ok := strings.Cut(one, "?"); ok {
				if q, err := url.ParseQuery(query); err == nil {
					for k, vs := range q {
						for _, v := range vs {
							switch {
							case containsAny(strings.ToLower(k), secretParams):
								add(v)
							case strings.Contains(v, "@") && strings.Contains(v, "://"):
								fromURL(v) // an endpoint with credentials
							}
						}
					}
				}
			}
		}
	}
	fromURL(a.natsURL)
	fromURL(a.blobsURL)
	n := a.natsAuth
	add(n.password)
	add(n.token)
	if n.password == "" {
		add(n.user) // sent as a token
	}
	for _, file := range []string{n.nkey, n.creds} {
		if file == "" {
			continue
		}
		if isSeed(strings.TrimSpace(file)) {
			add(file)
			continue
		}
		if f, err := os.Open(file); err == nil {
			sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
			for sc.Scan() {
				if l := strings.TrimSpace(sc.Text()); isSeed(l) || strings.HasPrefix(l, "eyJ") {
					add(l) // a seed, a JWT
				}
			}
			f.Close()
		}
	}
	for _, env := range secretEnv {
		add(a.getenv(env))
	}
	if a.globals != nil {
		a.globals.VisitAll(func(f *pflag.Flag) {
			if isSecret(f) {
				add(f.Value.String())
			}
		})
	}
	// Longest first, so that a secret containing another is hidden whole.
	slices.SortFunc(out, func(x, y string) int { return len(y) - len(x) })
	return slices.Compact(out)
}

// scrubWriter replaces every secret it was told of by Redacted in what is
// written through it.
type scrubWriter struct {
	w       io.Writer
	mu      sync.Mutex
	secrets []string
}

func (s *scrubWriter) setSecrets(secrets []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = secrets
}

func (s *scrubWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	secrets := s.secrets
	s.mu.Unlock()
	out := string(p)
	for _, sec := range secrets {
		out = strings.ReplaceAll(out, sec, Redacted)
		if esc := url.QueryEscape(sec); esc != sec {
			out = strings.ReplaceAll(out, esc, Redacted)
		}
	}
	if _, err := io.WriteString(s.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

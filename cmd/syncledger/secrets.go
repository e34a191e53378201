package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Secrets are hidden in one place: where output leaves the process. Both
// stdout and stderr are scrubWriters (newApp), so every message, result,
// --json object (the error object included), log record and usage text goes
// through scrub, which replaces
//
//   - every secret in effect (secretsInEffect: NATS credentials however given,
//     the credentials in the NATS and blob store URLs, the blob stores' secret
//     environment, every flag marked or named secret), in each form output can
//     quote it in: as is, URL-escaped, JSON-escaped and Go-quoted; and
//   - the credentials of every URL in the text (redactURL), so that a URL this
//     process did not take as a setting (the ledger's stored blob store URL)
//     shows none either.
//
// redactURL and redactValue (config.go) hide them where a value is shown on
// purpose (config show, the URLs in messages), so that the text reads
// "REDACTED" rather than a hole. What is not output of this process stays
// byte for byte: the stdout of exec's command, the swamp agent's protocol
// (values swamp stores, which may hold any string), and the records of
// `consume audit --file -` (app.rawStdout).

// natsSchemes are the URL schemes of NATS servers. Their URLs have no path,
// query or fragment that matters, and a password written into one unescaped
// (a generated one often holds '/', '?', '#', '+' or '@') runs to the last '@'.
var natsSchemes = []string{"nats", "tls", "ws", "wss"}

// splitURLs splits a comma-separated list of URLs (nats.go's form). A piece
// with no scheme but an '@' continues the piece before it when that one has
// no '@', or no port after its last '@': a password holding ',' (and '@') is
// not cut in two. (A list is ambiguous where a password holds ",x@h:1":
// nats.go reads two URLs there too.)
func splitURLs(raw string) []string {
	var out []string
	for _, p := range strings.Split(raw, ",") {
		if n := len(out); n > 0 && !strings.Contains(p, "://") && strings.Contains(p, "@") {
			prev := out[n-1]
			at := strings.LastIndex(prev, "@")
			if at < 0 || !hostPortRE.MatchString(prev[at+1:]) {
				out[n-1] += "," + p
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// hostPortRE matches what follows the user information of a URL that ends
// its authority with a port.
var hostPortRE = regexp.MustCompile(`^[^/?#@]*:\d+([/?#].*)?\s*$`)

// splitUserinfo splits one URL, with or without a scheme, at its user
// information: "nats://alice:pw@h:4222" and "alice:pw@h:4222" both give
// "alice:pw" (nats.go accepts both forms; url.Parse reads the second as a
// scheme "alice"). In a NATS URL (natsSchemes, or none) the user information
// runs to the last '@', whatever it holds; in another URL it is in the
// authority, before the first '/', '?' or '#'.
func splitUserinfo(one string) (scheme, userinfo, rest string, ok bool) {
	one = strings.TrimSpace(one)
	scheme, after, hasScheme := strings.Cut(one, "://")
	if !hasScheme {
		scheme, after = "", one
	}
	authority, tail := after, ""
	if hasScheme && !slices.Contains(natsSchemes, strings.ToLower(scheme)) {
		if i := strings.IndexAny(after, "/?#"); i >= 0 {
			authority, tail = after[:i], after[i:]
		}
		// user:pass@ with a '/' in the password (http://u:p/w@h): the last
		// '@' before the query ends it, when a ':' comes before the '/'.
		if !strings.Contains(authority, "@") && strings.Contains(authority, ":") && strings.HasPrefix(tail, "/") {
			head := after
			if q := strings.IndexAny(after, "?#"); q >= 0 {
				head = after[:q]
			}
			if at := strings.LastIndex(head, "@"); at >= 0 {
				end := len(after)
				if j := strings.IndexAny(after[at+1:], "/?#"); j >= 0 {
					end = at + 1 + j
				}
				authority, tail = after[:end], after[end:]
			}
		}
	}
	i := strings.LastIndex(authority, "@")
	if i < 0 {
		return scheme, "", one, false
	}
	return scheme, authority[:i], authority[i+1:] + tail, true
}

// secretParams are words that make a query parameter a secret.
var secretParams = []string{"secret", "token", "password", "key", "sig", "credential"}

// redactURL hides the credentials of each comma-separated URL in raw: its user
// information (with or without a scheme, escaped or not) and query parameters
// named like secrets (or holding a URL with credentials).
func redactURL(raw string) string {
	parts := splitURLs(raw)
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

// dialURL is raw as nats.go is given it: the user information of each NATS
// URL escaped, so that a password written unescaped connects, and no part of
// it reaches nats.go's parse errors (which quote the URL, and cut a password
// at its first '/' into a "port"). Escapes already written are kept.
func dialURL(raw string) string {
	parts := splitURLs(raw)
	for i, one := range parts {
		scheme, ui, rest, ok := splitUserinfo(one)
		if !ok || scheme != "" && !slices.Contains(natsSchemes, strings.ToLower(scheme)) {
			continue
		}
		unesc := func(s string) string {
			if u, err := url.PathUnescape(s); err == nil {
				return u
			}
			return s
		}
		var info *url.Userinfo
		if user, pass, hasPass := strings.Cut(ui, ":"); hasPass {
			info = url.UserPassword(unesc(user), unesc(pass))
		} else {
			info = url.User(unesc(ui))
		}
		// ',' is no URL escape's business, but nats.go cuts its list there.
		one = strings.ReplaceAll(info.String(), ",", "%2C") + "@" + rest
		if scheme != "" {
			one = scheme + "://" + one
		}
		parts[i] = one
	}
	return strings.Join(parts, ",")
}

func containsAny(s string, words []string) bool {
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s, w) })
}

// secretEnv are environment variables of the blob stores' clients that hold
// secrets. AWS_ACCESS_KEY_ID is not one: it names the key, as a user name
// does (AWS prints it in its own errors), and a name can be any word — an S3
// gateway's "syncledger" or "minioadmin" — whose every occurrence in output
// (each message's "syncledger:" first) the filter would replace.
var secretEnv = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_OAUTH_ACCESS_TOKEN"}

// urlSecrets returns the secrets a URL list holds: each URL's user information
// (whole, and its password or token, as written and unescaped) and the values
// of its query parameters named like secrets (recursively, for a parameter
// holding a URL).
func urlSecrets(raw string) []string {
	var out []string
	for _, one := range splitURLs(raw) {
		if _, ui, _, ok := splitUserinfo(one); ok {
			out = append(out, ui)
			user, pass, hasPass := strings.Cut(ui, ":")
			if !hasPass {
				pass = user // a token; a user name beside a password is no secret
			}
			out = append(out, pass)
			if u, err := url.PathUnescape(pass); err == nil {
				out = append(out, u)
			}
		}
		if _, query, ok := strings.Cut(one, "?"); ok {
			if q, err := url.ParseQuery(query); err == nil {
				for k, vs := range q {
					for _, v := range vs {
						switch {
						case containsAny(strings.ToLower(k), secretParams):
							out = append(out, v)
						case strings.Contains(v, "@") && strings.Contains(v, "://"):
							out = append(out, urlSecrets(v)...)
						}
					}
				}
			}
		}
	}
	return out
}

// secretsInEffect returns the secret strings this process holds: NATS
// credentials however given (URL user information, user and password, token,
// nkey seed inline or in its file, the JWT and seed of a credentials file),
// secrets in the blob store URL and the blob stores' secret environment
// variables, the value of every flag (global, or of cmd) marked or named
// secret, the credentials in every URL flag, and the path of an endpoint URL
// (a webhook's, which often is its secret).
func (a *app) secretsInEffect(cmd *cobra.Command) []string {
	var out []string
	add := func(ss ...string) {
		for _, s := range ss {
			if s = strings.TrimSpace(s); len(s) >= 4 {
				out = append(out, s)
			}
		}
	}
	add(urlSecrets(a.natsURL)...)
	add(urlSecrets(a.blobsURL)...)
	n := a.natsAuth
	add(n.password, n.token)
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
	visit := func(f *pflag.Flag) {
		v := f.Value.String()
		switch {
		case isSecret(f):
			add(v)
		case isURLFlag(f):
			add(urlSecrets(v)...)
			if f.Name == "url" {
				if u, err := url.Parse(v); err == nil && strings.Trim(u.Path, "/") != "" {
					add(u.EscapedPath(), u.Path)
				}
			}
		}
	}
	if a.globals != nil {
		a.globals.VisitAll(visit)
	}
	if cmd != nil {
		cmd.Flags().VisitAll(visit)
	}
	// Longest first, so that a secret containing another is hidden whole.
	slices.SortFunc(out, func(x, y string) int { return len(y) - len(x) })
	return slices.Compact(out)
}

// forms returns the ways output can quote secret: as is, URL-escaped (query
// and path), JSON-escaped and Go-quoted (%q, slog's text format).
func forms(secret string) []string {
	out := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	if b, err := json.Marshal(secret); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	q := strconv.Quote(secret)
	out = append(out, q[1:len(q)-1])
	slices.Sort(out)
	return slices.Compact(out)
}

// urlInText finds the URLs in output text, for redactURL. A URL ends at
// white space, a quote or a backslash (which starts a JSON or Go escape: the
// text around it stays as it was).
var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>\x60\\]+`)

// scrubber holds the secrets to hide (every form of each, longest first) for
// the scrubWriters of stdout and stderr.
type scrubber struct {
	mu      sync.Mutex
	secrets []string
}

func (s *scrubber) setSecrets(secrets []string) {
	var all []string
	for _, sec := range secrets {
		all = append(all, forms(sec)...)
	}
	slices.SortFunc(all, func(x, y string) int { return len(y) - len(x) })
	all = slices.Compact(all)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = all
}

// scrub returns text with its secrets, and the credentials of its URLs,
// replaced by Redacted.
func (s *scrubber) scrub(text string) string {
	s.mu.Lock()
	secrets := s.secrets
	s.mu.Unlock()
	for _, sec := range secrets {
		text = strings.ReplaceAll(text, sec, Redacted)
	}
	if strings.Contains(text, "://") {
		text = urlInText.ReplaceAllStringFunc(text, func(u string) string {
			if _, ui, _, ok := splitUserinfo(u); ok && placeholderRE.MatchString(ui) && !strings.Contains(u, "?") {
				return u // a form shown to the reader (nats://USER:PASSWORD@host), holding no secret
			}
			return redactURL(u)
		})
	}
	return text
}

// placeholderRE matches the user information of the URL forms help and hints
// show.
var placeholderRE = regexp.MustCompile(`^(TOKEN|USER|USER:PASS|USER:PASSWORD)$`)

// scrubWriter is where output leaves the process: it writes to w what it is
// given, scrubbed. A write is scrubbed on its own: every message, log record,
// result and JSON value is one write.
type scrubWriter struct {
	w io.Writer
	s *scrubber
}

func (w scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.s.scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

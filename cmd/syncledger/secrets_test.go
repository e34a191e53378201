package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"alice:s3cret@127.0.0.1:4222", "REDACTED@127.0.0.1:4222"},
		{"tok@127.0.0.1:4222", "REDACTED@127.0.0.1:4222"},
		{"nats://alice:s3cret@h:4222", "nats://REDACTED@h:4222"},
		{"nats://a:b@h1:4222, c:d@h2:4222", "nats://REDACTED@h1:4222,REDACTED@h2:4222"},
		{"tls://p%40ss:w@h", "tls://REDACTED@h"},
		{"file:///data/a@b/blobs", "file:///data/a@b/blobs"},
		{"s3://bucket/p?endpoint=http://127.0.0.1:9000&region=x", "s3://bucket/p?endpoint=http://127.0.0.1:9000&region=x"},
		{"s3://bucket/p?region=x&token=t0k", "s3://bucket/p?region=x&token=REDACTED"},
		{"s3://bucket/p?endpoint=http://u:p@127.0.0.1:9000", "s3://bucket/p?endpoint=http%3A%2F%2FREDACTED%40127.0.0.1%3A9000"},
		// Passwords written unescaped, as generated ones often are (issue 38 point 12).
		{"nats://alice:Zq9x/Wv8y?Ut7z+Sr6w@h:4222", "nats://REDACTED@h:4222"},
		{"nats://alice:a@b#c/d@h:4222", "nats://REDACTED@h:4222"},
		{"nats://alice:x,y@h:4222", "nats://REDACTED@h:4222"},
		{"tls://t0k/en?x@h:4222,ws://u:p?q@h2:8080", "tls://REDACTED@h:4222,ws://REDACTED@h2:8080"},
		{"wss://u:p/q@h:443/path", "wss://REDACTED@h:443/path"},
		{"u:p/q?r@h:4222", "REDACTED@h:4222"},
		{"nats://h1:4222,nats://u:p/w@h2:4222", "nats://h1:4222,nats://REDACTED@h2:4222"},
		{"gs://b/p?endpoint=http://u:p/w@127.0.0.1:9000", "gs://b/p?endpoint=http%3A%2F%2FREDACTED%40127.0.0.1%3A9000"},
		{"s3://b/p?region=x&secret_access_key=k/e+y", "s3://b/p?region=x&secret_access_key=REDACTED"},
		{"https://github.com/a@b", "https://github.com/a@b"},
	} {
		if got := redactURL(c.in); got != c.want {
			t.Errorf("redactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDialURL: nats.go is given the user information of each NATS URL
// escaped, so that an unescaped password connects and never reaches its parse
// errors; what was escaped already stays as it was.
func TestDialURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:p/ss?w+rd@h:4222", "nats://alice:p%2Fss%3Fw+rd@h:4222"},
		{"nats://alice:p%2Fss@h:4222", "nats://alice:p%2Fss@h:4222"},
		{"nats://alice:a@b#c@h:4222", "nats://alice:a%40b%23c@h:4222"},
		{"nats://u:x,y@h1:4222,nats://t/k@h2:4222", "nats://u:x%2Cy@h1:4222,nats://t%2Fk@h2:4222"},
		{"alice:p/w@h:4222", "alice:p%2Fw@h:4222"},
		{"nats://alice:100%@h:4222", "nats://alice:100%25@h:4222"},
	} {
		got := dialURL(c.in)
		if got != c.want {
			t.Errorf("dialURL(%q) = %q, want %q", c.in, got, c.want)
			continue
		}
		// And what nats.go reads back is the password as written.
		one := strings.Split(got, ",")[0]
		if !strings.Contains(one, "://") {
			one = "nats://" + one
		}
		u, err := url.Parse(one)
		if err != nil {
			t.Errorf("url.Parse(dialURL(%q)): %v", c.in, err)
			continue
		}
		_, ui, _, _ := splitUserinfo(strings.Split(c.in, ",")[0])
		if _, wantPass, ok := strings.Cut(ui, ":"); ok {
			if p, _ := u.User.Password(); p != wantPass && !strings.Contains(wantPass, "%2F") {
				t.Errorf("dialURL(%q): nats.go reads password %q, want %q", c.in, p, wantPass)
			}
		}
	}
}

// TestScrubForms: a secret is hidden however output quotes it — as is,
// URL-escaped, JSON-escaped, Go-quoted — and every URL's credentials too,
// whether or not they are a setting.
func TestScrubForms(t *testing.T) {
	t.Parallel()
	pw := `Zq9x/Wv8y?"Ut7z\Sr6w+`
	s := &scrubber{}
	s.setSecrets([]string{pw})
	b, _ := json.Marshal(map[string]string{"message": "connect with " + pw})
	for _, text := range []string{
		"as is: " + pw,
		"query: " + url.QueryEscape(pw),
		"path: " + url.PathEscape(pw),
		"json: " + string(b),
		fmt.Sprintf("quoted: %q", pw),
		"a URL no setting names: nats://bob:Yx1w/Tu2v@other:4222 and s3://b/p?token=Ab3dEf9g",
	} {
		got := s.scrub(text)
		for _, frag := range []string{"Zq9x", "Wv8y", "Ut7z", "Sr6w", "Yx1w", "Tu2v", "Ab3dEf9g"} {
			if strings.Contains(got, frag) {
				t.Errorf("scrub(%q) = %q: shows %q", text, got, frag)
			}
		}
		if !strings.Contains(got, Redacted) {
			t.Errorf("scrub(%q) = %q: nothing redacted", text, got)
		}
	}
	if got := s.scrub("file:///data/a@b/blobs nats://127.0.0.1:4222"); got != "file:///data/a@b/blobs nats://127.0.0.1:4222" {
		t.Errorf("scrub of URLs without credentials: %q", got)
	}
}

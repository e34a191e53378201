package main

import "testing"

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
	} {
		if got := redactURL(c.in); got != c.want {
			t.Errorf("redactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

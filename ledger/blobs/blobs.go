package blobs

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/gcsblob"
	"github.com/syncledger/syncledger/ledger/s3blob"
)

// Forms lists the accepted URL forms; every ParseURL error ends with it.
const Forms = "accepted forms: file:///absolute/dir, " +
	"s3://bucket[/prefix][?endpoint=http(s)://host[:port]&region=REGION&path-style=true], " +
	"gs://bucket[/prefix], nats://bucket[?replicas=N]"

// Schemes.
const (
	SchemeFile = "file"
	SchemeS3   = "s3"
	SchemeGCS  = "gs"
	SchemeNATS = "nats"
)

// Spec is a parsed blob store URL.
type Spec struct {
	Scheme string // SchemeFile, SchemeS3, SchemeGCS or SchemeNATS

	Dir string // file: the absolute directory

	Bucket string // s3, gs, nats
	Prefix string // s3, gs: key prefix in the bucket, without leading or trailing "/"

	Endpoint  string // s3: endpoint URL of an S3-compatible server ("" = AWS)
	Region    string // s3: region ("" = the SDK's default chain)
	PathStyle bool   // s3: path-style addressing

	Replicas int // nats: replicas of a bucket Open creates (0 = 1)
}

// Options carries what a URL cannot: live connections, and the retry policy.
type Options struct {
	// NATS opens a nats:// store's driver, the bucket of its URL (with its
	// replicas when it creates it), on a connection the caller holds: the
	// NATS adapter's Client.ObjectStore, or natsblob.Opener(conn). Required
	// for nats:// URLs.
	NATS func(ctx context.Context, bucket string, replicas int) (driver.Bucket, error)
	// Retry is the bucket's retry policy (ledger.RetryPolicy: the zero value
	// is the default, 4 attempts).
	Retry ledger.RetryPolicy
}

func invalid(raw, format string, args ...any) error {
	return fmt.Errorf("blob store URL %q: %s: %w (%s)", raw, fmt.Sprintf(format, args...), ledger.ErrInvalid, Forms)
}

// ParseURL parses a blob store URL (see the package doc). It touches neither the
// network nor the filesystem.
func ParseURL(raw string) (Spec, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Spec{}, invalid(raw, "%v", err)
	}
	switch {
	case u.Scheme == "":
		return Spec{}, invalid(raw, "no scheme")
	case u.Opaque != "":
		return Spec{}, invalid(raw, "want %s://…", u.Scheme)
	case u.User != nil:
		return Spec{}, invalid(raw, "credentials do not belong in the URL (use the backend's own credential chain)")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return Spec{}, invalid(raw, "unexpected fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Spec{}, invalid(raw, "query: %v", err)
	}
	switch u.Scheme {
	case SchemeFile:
		return parseFile(raw, u, q)
	case SchemeS3, SchemeGCS:
		return parseBucket(raw, u, q)
	case SchemeNATS:
		return parseNATS(raw, u, q)
	default:
		return Spec{}, invalid(raw, "unknown scheme %q", u.Scheme)
	}
}

// onlyParams rejects parameters other than allowed, and repeated ones.
func onlyParams(raw string, q url.Values, allowed ...string) error {
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return invalid(raw, "unknown query parameter %q (this scheme takes none)", k)
			}
			return invalid(raw, "unknown query parameter %q (accepted: %s)", k, strings.Join(allowed, ", "))
		}
		if len(vs) != 1 {
			return invalid(raw, "query parameter %q given %d times", k, len(vs))
		}
	}
	return nil
}

func parseFile(raw string, u *url.URL, q url.Values) (Spec, error) {
	if u.Host != "" && u.Host != "localhost" {
		return Spec{}, invalid(raw, "file URL with host %q (want file:///absolute/dir)", u.Host)
	}
	if err := onlyParams(raw, q); err != nil {
		return Spec{}, err
	}
	if !strings.HasPrefix(u.Path, "/") {
		return Spec{}, invalid(raw, "file URL needs an absolute directory")
	}
	return Spec{Scheme: SchemeFile, Dir: path.Clean(u.Path)}, nil
}

func bucketAndPrefix(raw string, u *url.URL) (bucket, prefix string, err error) {
	if u.Host == "" {
		return "", "", invalid(raw, "no bucket")
	}
	if strings.Contains(u.Host, ":") {
		return "", "", invalid(raw, "bucket %q contains ':' (an endpoint goes in ?endpoint=)", u.Host)
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := ledger.ValidateKey(prefix); err != nil {
			return "", "", invalid(raw, "prefix: %v", err)
		}
	}
	return u.Host, prefix, nil
}

func parseBucket(raw string, u *url.URL, q url.Values) (Spec, error) {
	bucket, prefix, err := bucketAndPrefix(raw, u)
	if err != nil {
		return Spec{}, err
	}
	spec := Spec{Scheme: u.Scheme, Bucket: bucket, Prefix: prefix}
	if u.Scheme == SchemeGCS {
		return spec, onlyParams(raw, q)
	}
	if err := onlyParams(raw, q, "endpoint", "region", "path-style"); err != nil {
		return Spec{}, err
	}
	if ep := q.Get("endpoint"); ep != "" {
		e, err := url.Parse(ep)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
			return Spec{}, invalid(raw, "endpoint %q: want http(s)://host[:port]", ep)
		}
		spec.Endpoint = ep
	}
	if q.Has("region") {
		if spec.Region = q.Get("region"); spec.Region == "" {
			return Spec{}, invalid(raw, "empty region")
		}
	}
	if q.Has("path-style") {
		v, err := strconv.ParseBool(q.Get("path-style"))
		if err != nil {
			return Spec{}, invalid(raw, "path-style %q: want true or false", q.Get("path-style"))
		}
		spec.PathStyle = v
	}
	return spec, nil
}

func parseNATS(raw string, u *url.URL, q url.Values) (Spec, error) {
	if !ledger.IsToken(u.Host, 0) {
		return Spec{}, invalid(raw, "bucket %q: want letters, digits, '-' and '_' "+
			"(nats://BUCKET names an object store bucket, not a server: the connection comes from Options.NATS)", u.Host)
	}
	if u.Path != "" && u.Path != "/" {
		return Spec{}, invalid(raw, "nats URL has a path %q (the bucket holds the whole store)", u.Path)
	}
	if err := onlyParams(raw, q, "replicas"); err != nil {
		return Spec{}, err
	}
	spec := Spec{Scheme: SchemeNATS, Bucket: u.Host}
	if q.Has("replicas") {
		n, err := strconv.Atoi(q.Get("replicas"))
		if err != nil || n < 1 || n > 5 {
			return Spec{}, invalid(raw, "replicas %q: want 1 to 5", q.Get("replicas"))
		}
		spec.Replicas = n
	}
	return spec, nil
}

// Open parses rawURL and opens the bucket it names: the one way the ledger's
// blob store (and a swamp datastore) is built, the driver the URL names under
// ledger.NewBucket with opts.Retry. Close it when done (the gs:// client holds
// connections).
func Open(ctx context.Context, rawURL string, opts Options) (*ledger.Bucket, error) {
	spec, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return OpenSpec(ctx, spec, opts)
}

// OpenSpec opens the bucket spec describes (see Open).
func OpenSpec(ctx context.Context, spec Spec, opts Options) (*ledger.Bucket, error) {
	d, err := OpenDriver(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	return ledger.NewBucket(d, opts.Retry), nil
}

// OpenDriver opens the driver spec names, for what only a backend can tell
// (whether its bucket protects stored objects: Protection, Harden); every
// other use goes through Open. Close it when done.
func OpenDriver(ctx context.Context, spec Spec, opts Options) (driver.Bucket, error) {
	var (
		objs driver.Bucket
		err  error
	)
	// Each case assigns only on success: a nil *Store in a non-nil interface would
	// look like a store to the caller.
	switch spec.Scheme {
	case SchemeFile:
		var s *fileblob.Store
		if s, err = fileblob.New(fileblob.Config{Dir: spec.Dir}); err == nil {
			objs = s
		}
	case SchemeS3:
		var s *s3blob.Store
		if s, err = s3blob.New(ctx, s3blob.Config{
			Bucket:    spec.Bucket,
			Prefix:    spec.Prefix,
			Endpoint:  spec.Endpoint,
			Region:    spec.Region,
			PathStyle: spec.PathStyle,
		}); err == nil {
			objs = s
		}
	case SchemeGCS:
		var s *gcsblob.Store
		if s, err = gcsblob.New(ctx, gcsblob.Config{Bucket: spec.Bucket, Prefix: spec.Prefix}); err == nil {
			objs = s
		}
	case SchemeNATS:
		if opts.NATS == nil {
			return nil, fmt.Errorf("nats://%s: Options.NATS is nil (a nats:// store needs a connection): %w", spec.Bucket, ledger.ErrInvalid)
		}
		objs, err = opts.NATS(ctx, spec.Bucket, spec.Replicas)
	default:
		return nil, fmt.Errorf("unknown blob store scheme %q: %w (%s)", spec.Scheme, ledger.ErrInvalid, Forms)
	}
	if err != nil {
		return nil, err // the backends' errors name the backend
	}
	return objs, nil
}

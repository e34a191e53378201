package blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/internal/gcstest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want Spec
	}{
		{"file:///var/lib/blobs", Spec{Scheme: "file", Dir: "/var/lib/blobs"}},
		{"file:///var/lib/blobs/", Spec{Scheme: "file", Dir: "/var/lib/blobs"}},
		{"file://localhost/srv/x", Spec{Scheme: "file", Dir: "/srv/x"}},
		{"file:///with%20space", Spec{Scheme: "file", Dir: "/with space"}},
		{"file:///", Spec{Scheme: "file", Dir: "/"}},
		{"s3://bucket", Spec{Scheme: "s3", Bucket: "bucket"}},
		{"s3://bucket/", Spec{Scheme: "s3", Bucket: "bucket"}},
		{"s3://bucket/a/b/", Spec{Scheme: "s3", Bucket: "bucket", Prefix: "a/b"}},
		{"s3://my.bucket-1/p?region=eu-west-1", Spec{Scheme: "s3", Bucket: "my.bucket-1", Prefix: "p", Region: "eu-west-1"}},
		{
			"s3://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1&path-style=true",
			Spec{Scheme: "s3", Bucket: "bucket", Prefix: "prefix", Endpoint: "http://127.0.0.1:7070", Region: "us-east-1", PathStyle: true},
		},
		{
			"s3://bucket?endpoint=" + url.QueryEscape("https://minio.example:9000/") + "&path-style=false",
			Spec{Scheme: "s3", Bucket: "bucket", Endpoint: "https://minio.example:9000/"},
		},
		{"s3://bucket?path-style=1", Spec{Scheme: "s3", Bucket: "bucket", PathStyle: true}},
		{"gs://bucket", Spec{Scheme: "gs", Bucket: "bucket"}},
		{"gs://bucket/ledgers/prod", Spec{Scheme: "gs", Bucket: "bucket", Prefix: "ledgers/prod"}},
		{"nats://blobs", Spec{Scheme: "nats", Bucket: "blobs"}},
		{"nats://my_blobs-2/", Spec{Scheme: "nats", Bucket: "my_blobs-2"}},
		{"nats://blobs?replicas=3", Spec{Scheme: "nats", Bucket: "blobs", Replicas: 3}},
	} {
		got, err := ParseURL(tc.raw)
		if err != nil {
			t.Errorf("ParseURL(%q) = %v", tc.raw, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseURL(%q) mismatch (-want +got):\n%s", tc.raw, diff)
		}
	}
}

func TestParseURLInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, why string
	}{
		{"", "no scheme"},
		{"/var/lib/blobs", "no scheme"},
		{"blobs", "no scheme"},
		{"http://host/x", "unknown scheme"},
		{"S4://bucket", "unknown scheme"},
		{"file:relative/dir", "want file://"},
		{"file://host/dir", "with host"},
		{"file:///dir?x=1", "unknown query parameter"},
		{"file:///dir#frag", "fragment"},
		{"s3://", "no bucket"},
		{"s3:///prefix", "no bucket"},
		{"s3:bucket", "want s3://"},
		{"s3://bucket:9000/p", "contains ':'"},
		{"s3://user:secret@bucket/p", "credentials"},
		{"s3://bucket/a//b", "prefix"},
		{"s3://bucket/a/../b", "prefix"},
		{"s3://bucket?endpoint=localhost:9000", "endpoint"},
		{"s3://bucket?endpoint=ftp://host", "endpoint"},
		{"s3://bucket?path-style=yes", "path-style"},
		{"s3://bucket?region=", "empty region"},
		{"s3://bucket?pathstyle=true", "unknown query parameter"},
		{"s3://bucket?region=a&region=b", "given 2 times"},
		{"gs://", "no bucket"},
		{"gs://bucket?endpoint=http://x", "unknown query parameter"},
		{"nats://", "bucket"},
		{"nats://my.bucket", "bucket"},
		{"nats://127.0.0.1:4222", "bucket"},
		{"nats://bucket/sub", "path"},
		{"nats://bucket?replicas=0", "replicas"},
		{"nats://bucket?replicas=x", "replicas"},
		{"nats://bucket?prefix=x", "unknown query parameter"},
		{"s3://bucket/%zz", "invalid URL escape"},
	} {
		_, err := ParseURL(tc.raw)
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", tc.raw, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.why) || !strings.Contains(msg, Forms) {
			t.Errorf("ParseURL(%q) error %q: want it to mention %q and list the accepted forms", tc.raw, msg, tc.why)
		}
	}
}

// roundTrip puts and gets one object through an opened store.
func roundTrip(t *testing.T, objs *ledger.Bucket) {
	t.Helper()
	ctx := t.Context()
	data := []byte("through the URL opener")
	if err := objs.PutObject(ctx, "dir/key", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	rc, err := objs.GetObject(ctx, "dir/key")
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetObject content = %q, %v, want %q", got, err, data)
	}
}

func TestOpenFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	objs, err := Open(t.Context(), "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, objs)
}

func TestOpenS3(t *testing.T) {
	mem := s3mem.New()
	if err := mem.CreateBucket("bucket"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	// Credentials come from the SDK's default chain: the environment, isolated from
	// any config on this machine.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	objs, err := Open(t.Context(), "s3://bucket/pre?path-style=true&region=us-east-1&endpoint="+url.QueryEscape(srv.URL), Options{})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, objs)
	if _, err := mem.HeadObject("bucket", "pre/dir/key"); err != nil {
		t.Errorf("object not at bucket/pre/dir/key: %v", err)
	}
}

func TestOpenGCS(t *testing.T) {
	srv := gcstest.Start(t)
	srv.CreateBucket(t, "bucket")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.URL())
	objs, err := Open(t.Context(), "gs://bucket/pre", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := objs.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}()
	roundTrip(t, objs)
	if _, err := srv.GetObject("bucket", "pre/dir/key"); err != nil {
		t.Errorf("object not at bucket/pre/dir/key: %v", err)
	}
}

func TestOpenNATS(t *testing.T) {
	t.Parallel()
	if _, err := Open(t.Context(), "nats://blobs", Options{}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Open(nats://…) without a connection = %v, want ErrInvalid", err)
	}
	// The opener gets the URL's bucket and replicas; its error is Open's.
	refused := errors.New("refused")
	var got string
	_, err := Open(t.Context(), "nats://other?replicas=3", Options{NATS: func(_ context.Context, bucket string, replicas int) (driver.Bucket, error) {
		got = fmt.Sprint(bucket, " ", replicas)
		return nil, refused
	}})
	if !errors.Is(err, refused) || got != "other 3" {
		t.Errorf("Open(nats://other?replicas=3) = %v, opener given %q; want the opener's error, given other 3", err, got)
	}
	_, nc := natsjstest.RunServer(t)
	objs, err := Open(t.Context(), "nats://blobs", Options{NATS: natsblob.Opener(nc)})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, objs)
}

func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"ftp://x", "s3://", "file:rel"} {
		objs, err := Open(t.Context(), raw, Options{})
		if !errors.Is(err, ledger.ErrInvalid) || objs != nil {
			t.Errorf("Open(%q) = %v, %v, want nil, ErrInvalid", raw, objs, err)
		}
	}
	objs, err := Open(t.Context(), "file:///dev/null/x", Options{})
	if err == nil || objs != nil {
		t.Errorf("Open(file under a non-directory) = %v, %v, want nil store and an error", objs, err)
	}
}

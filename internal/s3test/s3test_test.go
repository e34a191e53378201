package s3test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestPrefixEmptiedAtEnd: what a test stores under its prefix, over more than
// one page of a listing, is gone when the test ends; a neighbour whose name
// begins with the same characters, and the bucket, are not.
func TestPrefixEmptiedAtEnd(t *testing.T) {
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithTimeSkewLimit(0)).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	s := Server{Endpoint: srv.URL, Bucket: "bucket", Region: "us-east-1"}
	c := s.Client()
	put := func(key string) {
		t.Helper()
		if _, err := c.PutObject(t.Context(), &awss3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(key))}); err != nil {
			t.Fatal(err)
		}
	}
	var prefix string
	const n = 2_345 // three pages of 1,000
	t.Run("test", func(t *testing.T) {
		prefix = s.Prefix(t, "stem") // creates the bucket
		put(prefix + "0")            // a neighbour: prefix is not followed by a slash
		for i := range n {
			put(fmt.Sprintf("%s/d/%d", prefix, i))
		}
	})
	var keys []string
	pages := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(s.Bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(keys) != 1 || keys[0] != prefix+"0" {
		t.Fatalf("after the test the bucket holds %d keys (%.3q…), want only the neighbour %q", len(keys), keys, prefix+"0")
	}
}

func TestEmptyRefusesTheWholeBucket(t *testing.T) {
	for _, p := range []string{"", "/"} {
		if _, err := Empty(t.Context(), nil, "b", p); err == nil {
			t.Errorf("Empty under %q: no error", p)
		}
	}
}

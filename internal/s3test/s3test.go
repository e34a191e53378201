// Package s3test gives tests and the benchmark harness the real S3 server the
// environment names (SYNCLEDGER_TEST_S3_ENDPOINT; scripts/versitygw.sh starts
// one and exports the variables), its bucket created if missing, and prefixes
// that are emptied when the test ends.
//
// The server outlives every test that uses it, and it keeps what they store:
// a test that leaves its objects behind fills the server's disk a run at a
// time (seven CI runs left 5.5 GiB in versitygw's directory, and the next run
// failed with no space left on the device). Prefix is the way to store there.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The variables scripts/versitygw.sh exports.
const (
	EndpointEnv = "SYNCLEDGER_TEST_S3_ENDPOINT"
	BucketEnv   = "SYNCLEDGER_TEST_S3_BUCKET"
)

// DefaultBucket is the bucket when BucketEnv is not set.
const DefaultBucket = "syncledger-test"

// Hint tells how to get a server.
const Hint = EndpointEnv + ` is not set: start an S3 server with eval "$(scripts/versitygw.sh)"`

// Server is an S3 server reached with path-style addressing and the
// credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
type Server struct {
	Endpoint string
	Bucket   string
	Region   string // AWS_REGION, else us-east-1
}

// FromEnv returns the server EndpointEnv names; ok is false when it is unset.
func FromEnv() (s Server, ok bool) {
	s = Server{Endpoint: os.Getenv(EndpointEnv), Bucket: os.Getenv(BucketEnv), Region: os.Getenv("AWS_REGION")}
	if s.Bucket == "" {
		s.Bucket = DefaultBucket
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	return s, s.Endpoint != ""
}

// Client is an S3 client for the server.
func (s Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{Region: s.Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), "")})
}

// Prefix creates the bucket if it is missing and returns a prefix (no slash
// at either end) under which nothing is stored yet, beginning with stem. When
// t ends, passed or failed, every object under it is deleted.
func (s Server) Prefix(t testing.TB, stem string) string {
	t.Helper()
	c := s.Client()
	if err := EnsureBucket(t.Context(), c, s.Bucket); err != nil {
		t.Fatalf("S3 server %s (%s): %v", s.Endpoint, EndpointEnv, err)
	}
	prefix := fmt.Sprintf("%s-%d", stem, time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		n, err := Empty(ctx, c, s.Bucket, prefix+"/")
		if err != nil {
			t.Errorf("S3 server %s: remove what the test stored under %s/: %v", s.Endpoint, prefix, err)
		} else {
			t.Logf("S3 server %s: removed the %d objects the test stored under %s/", s.Endpoint, n, prefix)
		}
	})
	return prefix
}

// EnsureBucket creates bucket if it is missing.
func EnsureBucket(ctx context.Context, c *awss3.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(bucket)}); err == nil {
		return nil
	}
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %q: %w", bucket, err)
	}
	return nil
}

// Empty deletes every object in bucket whose key begins with prefix, a
// thousand to a request, and returns how many it deleted.
func Empty(ctx context.Context, c *awss3.Client, bucket, prefix string) (int, error) {
	if prefix == "" || strings.HasPrefix(prefix, "/") {
		return 0, fmt.Errorf("refusing to empty bucket %q under prefix %q: a test's prefix, please", bucket, prefix)
	}
	n := 0
	pages := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("list %q: %w", prefix, err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		out, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return n, fmt.Errorf("delete %d objects under %q: %w", len(ids), prefix, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return n, fmt.Errorf("delete %d objects under %q: %d failed, the first %s: %s %s",
				len(ids), prefix, len(out.Errors), aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		n += len(ids)
	}
	return n, nil
}

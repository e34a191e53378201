package s3blob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// loadAWS loads the AWS configuration as the AWS CLI does
// (config.LoadDefaultConfig: environment, shared config and credentials
// files, the profile's credential source, container and instance roles),
// with what cfg sets instead.
func loadAWS(ctx context.Context, cfg Config) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithLogger(logging.Nop{}), // the library never prints
		// The SDK's client keeps 10 idle connections per host (net/http's
		// default is 2); a host fetches 16 blobs at once by default, so the
		// rest were closed and dialled again all the time (16% of a cold
		// sync's client CPU, and the server's accepts). A BuildableClient,
		// so the configuration's CA bundle (AWS_CA_BUNDLE, ca_bundle) applies.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = maxIdleConnsPerHost
			t.MaxIdleConns = max(t.MaxIdleConns, maxIdleConnsPerHost)
		})),
		// When no region is configured; the credential providers' STS
		// clients get it too.
		config.WithDefaultRegion(DefaultRegion),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		var missing config.SharedConfigProfileNotExistError
		if errors.As(err, &missing) {
			return aws.Config{}, fmt.Errorf("AWS profile %q (AWS_PROFILE) is in none of %q: name one that is (aws configure list-profiles), or unset AWS_PROFILE: %w",
				missing.Profile, missing.Filename, ledger.ErrInvalid)
		}
		return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Credentials == nil && awsCfg.Credentials != nil {
		awsCfg.Credentials = &wayOut{CredentialsProvider: awsCfg.Credentials, profile: profileOf(awsCfg)}
	}
	return awsCfg, nil
}

// connect sets the store's S3 client and transfer manager. The client makes
// one attempt per request, whatever the AWS configuration says
// (AWS_MAX_ATTEMPTS, max_attempts): retrying is the ledger.Bucket's, one
// policy for every backend (ledger.RetryPolicy).
func (s *Store) connect() {
	s.client = awss3.NewFromConfig(s.aws, func(o *awss3.Options) {
		if s.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.cfg.Endpoint)
		}
		o.UsePathStyle = o.UsePathStyle || s.cfg.PathStyle
		if s.cfg.HTTPClient != nil {
			o.HTTPClient = s.cfg.HTTPClient
		}
		// A put is sent from its spool, or from parts held in memory: the
		// body's reads, paced by the network, are its progress.
		o.HTTPClient = driver.ProgressClient(o.HTTPClient)
		o.Retryer = aws.NopRetryer{}
		// An S3-compatible server (any endpoint of one's own) may lack the
		// newest checksum headers (x-amz-checksum-*, aws-chunked trailers):
		// checksums only where an operation requires one, unless the AWS
		// configuration says otherwise. Blobs are verified on every read
		// anyway, and over plain HTTP the SigV4 payload hash covers bodies.
		if o.BaseEndpoint != nil && !checksumsConfigured(s.aws) {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	s.uploads = transfermanager.New(s.client, func(o *transfermanager.Options) {
		o.PartSizeBytes = s.partSize
		o.MultipartUploadThreshold = s.partSize // a put that fits in one part is one PUT
		o.Concurrency = 1                       // one part sent while the next is read
		// The client's checksum setting (when_required for an S3-compatible
		// server), which the transfer manager would otherwise override.
		o.RequestChecksumCalculation = s.client.Options().RequestChecksumCalculation
		o.FailTimeout = abortTimeout // the abort outlives a cancelled put
	})
}

// abortTimeout bounds the abort of a failed multipart upload.
const abortTimeout = 30 * time.Second

// checksumsConfigured reports whether the environment or the shared
// configuration sets the request checksum calculation or the response
// checksum validation.
func checksumsConfigured(c aws.Config) bool {
	for _, src := range c.ConfigSources {
		switch s := src.(type) {
		case config.EnvConfig:
			if s.RequestChecksumCalculation != 0 || s.ResponseChecksumValidation != 0 {
				return true
			}
		case config.SharedConfig:
			if s.RequestChecksumCalculation != 0 || s.ResponseChecksumValidation != 0 {
				return true
			}
		}
	}
	return false
}

// profileOf returns the shared configuration profile the configuration was
// loaded from.
func profileOf(c aws.Config) string {
	for _, src := range c.ConfigSources {
		if s, ok := src.(config.SharedConfig); ok && s.Profile != "" {
			return s.Profile
		}
	}
	if p := os.Getenv("AWS_PROFILE"); p != "" {
		return p
	}
	return "default"
}

// wayOut adds the way out to a failure to get credentials from the AWS
// configuration: the SDK's own message says what failed, not what to do.
type wayOut struct {
	aws.CredentialsProvider
	profile string
}

func (w *wayOut) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := w.CredentialsProvider.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return c, fmt.Errorf("AWS credentials (profile %s): %w (check them with aws sts get-caller-identity --profile %s; "+
			"set them up with aws configure or aws configure sso; an IAM Identity Center (SSO) session that expired "+
			"signs in again with aws sso login --profile %s)",
			w.profile, err, w.profile, w.profile)
	}
	return c, err
}

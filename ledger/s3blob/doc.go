// Package s3blob is the blob driver (ledger/driver.Bucket) on an Amazon S3
// bucket or any S3-compatible server (MinIO, versitygw, Ceph RGW, …). It is
// used through a ledger.Bucket (blobs.Open), which checks keys and the
// context, retries and verifies: the driver only speaks S3.
//
// It is the official AWS SDK's S3 client (aws-sdk-go-v2's service/s3), its
// transfer manager for multipart uploads (feature/s3/transfermanager) and its
// configuration loader (config.LoadDefaultConfig), used whole but for
// retries: the region, the endpoint and the credentials come from the AWS
// configuration the way the AWS CLI reads it, and every credential source the
// CLI accepts without a prompt works — the environment's keys, the shared
// config and credentials files (AWS_PROFILE, AWS_CONFIG_FILE,
// AWS_SHARED_CREDENTIALS_FILE), IAM Identity Center (SSO) profiles with the
// token `aws sso login` cached, credential_process, assumed roles
// (role_arn with source_profile or credential_source), web identity
// (AWS_WEB_IDENTITY_TOKEN_FILE, web_identity_token_file), container
// credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI) and the
// EC2 instance role (IMDS). Config.Credentials replaces the chain when set.
// A failure to get credentials says how to check them and how an SSO profile
// signs in again (aws sso login).
//
// Keys live below an optional prefix in the bucket: with Prefix "ledgers/prod", key
// "blobs/sha256/ab/ab12…" is the S3 object "ledgers/prod/blobs/sha256/ab/ab12…".
//
// # S3-compatible servers
//
// Config.Endpoint (else AWS_ENDPOINT_URL_S3, the profile's endpoint_url,
// AWS_ENDPOINT_URL) names the server, and Config.PathStyle addresses the bucket
// as endpoint/bucket/key, which most of them need. With an endpoint of one's
// own, request checksums are calculated and response checksums validated only
// where an operation requires them (the SDK's when_required), since such
// servers may lack the newest checksum headers; AWS_REQUEST_CHECKSUM_CALCULATION
// and AWS_RESPONSE_CHECKSUM_VALIDATION (or the profile's
// request_checksum_calculation and response_checksum_validation), when set,
// decide instead. On AWS the SDK's default holds: a CRC32 with every upload,
// checked by S3, and validation of full-object downloads. Blobs are verified
// against their digest on every read whatever the setting.
//
// # Retries
//
// The SDK's retryer is off (aws.NopRetryer, whatever AWS_MAX_ATTEMPTS or
// max_attempts say): each call makes one attempt of each request, and
// retrying is the ledger.Bucket's, under the one policy every backend shares
// (ledger.RetryPolicy), as GCS's client's retries are off under it. A put is
// retried whole (a multipart upload from its first part), its content sought
// back.
//
// # Puts
//
// An S3 PUT is atomic: the object appears whole when the request completes, or not
// at all. PutObject keeps that property for any reader by spooling the content
// before it sends a byte: up to 1 MiB in memory, beyond that in a temporary file
// (Config.TempDir). Only once the caller's reader has returned io.EOF, without error,
// within the context, with the declared size, is the PUT sent, with a known
// Content-Length and a seekable body the SDK checksums (over plain HTTP the
// SigV4 payload hash, x-amz-content-sha256; on AWS a CRC32 as well; the server
// checks them against what it received) and rewinds to retry. A failing reader
// therefore never leaves a partial or empty object behind, and the previous version
// of the key stays in place.
//
// The alternatives were worse: streaming a non-seekable body needs an unsigned or
// aws-chunked payload, which plain-HTTP endpoints and several S3-compatible servers
// reject or mishandle, cannot be retried, and would let a reader error surface as a
// transport error mid-request; a multipart upload streams too but costs three
// requests for the common small blob and leaves parts behind when the abort fails.
// The price is one local copy of each put up to Config.MultipartAbove (64 MiB).
//
// A larger put, or one of unknown size that fills more than a part, goes
// through the SDK's transfer manager as a multipart upload (a single PUT is
// capped at 5 GiB, and spooling gigabytes costs their write): parts of
// Config.PartSize (16 MiB) are read into memory — the part being sent, the
// next one being read, at most three parts — and each is a seekable body the
// SDK signs. The upload is completed only after the reader returned io.EOF,
// which the ledger.Bucket's reader does only without error, within the
// context, at the declared size; any failure aborts the upload (within 30
// s, even after the context ended), so the object never appears in part and
// the previous version stays; an abort that fails too leaves parts that a
// bucket lifecycle rule (AbortIncompleteMultipartUpload) removes. (The
// transfer manager logs a failed CompleteMultipartUpload with the standard
// log package: the one line this package may print, outside its control.)
//
// # Errors
//
// ErrorCode maps NoSuchBucket to ledger.ErrNoBucket (a HEAD's bare 404 asks
// HeadBucket once, until the bucket has been seen), NoSuchKey, NotFound and
// other 404 answers to ledger.ErrNotFound, AccessDenied and every other 403 (a
// policy's refusal, a wrong secret, an expired token) to ledger.ErrPermission;
// the ledger.Bucket makes none of them retried. The SDK's logger is disabled.
package s3blob

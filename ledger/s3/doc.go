// Package s3 is the ledger.ObjectStore on an Amazon S3 bucket or any S3-compatible
// server (MinIO, versitygw, Ceph RGW, …).
//
// It speaks the S3 REST calls it needs itself (client.go: object PUT, GET, HEAD,
// DELETE, ListObjectsV2, multipart uploads, two bucket reads), each signed with
// aws-sdk-go-v2's SigV4 signer, with credentials, region and HTTP client from
// the AWS configuration chain (awsconfig.go: the sources the SDK's
// config.LoadDefaultConfig reads, through the SDK's own credential providers)
// and the SDK's standard retry policy (AWS_MAX_ATTEMPTS). It links neither the
// SDK's S3 service client nor its config package: their package inits,
// endpoint rule tables and interface tables (and config's SSO and sign-in
// clients) cost every syncledger command at start-up whatever its blob store
// (issue 17). The endpoint is Config.Endpoint, else AWS_ENDPOINT_URL_S3,
// else the shared configuration's endpoint_url or AWS_ENDPOINT_URL, else AWS's
// regional endpoint (https://s3.REGION.amazonaws.com); FIPS, dual-stack and
// transfer-acceleration endpoints are not chosen for you (give one as the
// endpoint). Buckets are addressed virtual-hosted (BUCKET.host) unless
// Config.PathStyle, or the name is not a DNS label, or it has dots over TLS.
//
// Keys live below an optional prefix in the bucket: with Prefix "ledgers/prod", key
// "blobs/sha256/ab/ab12…" is the S3 object "ledgers/prod/blobs/sha256/ab/ab12…".
// Credentials come from the AWS default chain (environment, shared config and
// credentials profiles with keys, credential_process, assumed roles and web
// identity, container and instance roles; see loadAWS) unless Config supplies
// a provider; a profile that signs in with IAM Identity Center (SSO) is
// refused with the way out (the AWS CLI's export-credentials as
// credential_process). Endpoint and PathStyle address S3-compatible servers.
//
// # Puts
//
// An S3 PUT is atomic: the object appears whole when the request completes, or not
// at all. PutObject keeps that property for any reader by spooling the content
// before it sends a byte: up to 1 MiB in memory, beyond that in a temporary file
// (Config.TempDir). Only once the caller's reader has returned io.EOF, without error,
// within the context, with the declared size, is the PUT sent, with a known
// Content-Length and a seekable body that is hashed for the SigV4 payload
// signature (x-amz-content-sha256, which S3 checks against what it received)
// and rewound to retry. A failing reader
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
// A larger put, or one of unknown size that fills more than a part, is a
// multipart upload instead (a single PUT is capped at 5 GiB, and spooling
// gigabytes costs their write): parts of Config.PartSize (16 MiB) are read into
// memory one at a time and sent as seekable bodies, and the upload is completed
// only after the reader returned io.EOF without error at its declared size. Any
// failure aborts the upload, so the object never appears in part and the
// previous version stays; an abort that fails too leaves parts that a bucket
// lifecycle rule (AbortIncompleteMultipartUpload) removes.
//
// # Errors
//
// NoSuchKey, NotFound and other 404 answers (except NoSuchBucket) map to
// ledger.ErrNotFound; deleting an absent key is not an error. Failures caused by the
// context wrap its error. The library never logs: the SDK's logger is disabled.
package s3

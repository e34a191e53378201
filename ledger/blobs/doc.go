// Package blobs opens the ledger.Bucket a URL names — the one way a blob store
// (or a swamp datastore) is built, and the one place that knows every
// backend's driver:
//
//	file:///var/lib/syncledger/blobs                       a local directory (ledger/fileblob)
//	s3://bucket/prefix?endpoint=http://host:9000&region=us-east-1&path-style=true
//	                                                       S3 or an S3-compatible server (ledger/s3blob)
//	gs://bucket/prefix                                     Google Cloud Storage (ledger/gcsblob)
//	nats://bucket?replicas=3                               a JetStream object store bucket (ledger/natsblob)
//
// ParseURL is the pure half: it checks the URL and returns its Spec without touching
// the network or the filesystem, so the syntax is testable on its own. Open parses,
// constructs the backend's driver (ledger/driver.Bucket) and returns the
// ledger.Bucket over it, retrying under Options.Retry; close it when done.
// OpenDriver returns the driver alone, for what only a backend can tell (whether
// its bucket protects stored objects). Credentials never come from the URL: S3
// uses the AWS SDK's default chain, GCS Application Default Credentials (or
// STORAGE_EMULATOR_HOST), and nats:// the connection the caller holds, through
// Options.NATS (the NATS adapter's Client.ObjectStore, or natsblob.Opener): this
// package imports no NATS client.
//
// Every malformed URL fails with an error wrapping ledger.ErrInvalid that lists the
// accepted forms.
package blobs

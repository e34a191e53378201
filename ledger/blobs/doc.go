// Package blobs opens a ledger.ObjectStore from a URL, the one place that knows
// every backend:
//
//	file:///var/lib/syncledger/blobs                       a local directory (ledger/fileblob)
//	s3://bucket/prefix?endpoint=http://host:9000&region=us-east-1&path-style=true
//	                                                       S3 or an S3-compatible server (ledger/s3blob)
//	gs://bucket/prefix                                     Google Cloud Storage (ledger/gcsblob)
//	nats://bucket?replicas=3                               a JetStream object store bucket (ledger/natsblob)
//
// ParseURL is the pure half: it checks the URL and returns its Spec without touching
// the network or the filesystem, so the syntax is testable on its own. Open parses
// and then constructs the backend. Credentials never come from the URL: S3 uses the
// AWS SDK's default chain, GCS Application Default Credentials (or
// STORAGE_EMULATOR_HOST), and nats:// the connection the caller holds, opened
// through Options.NATS (natsblob.Opener): this package imports no NATS client.
//
// Every malformed URL fails with an error wrapping ledger.ErrInvalid that lists the
// accepted forms.
package blobs

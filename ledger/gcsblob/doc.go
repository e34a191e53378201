// Package gcsblob is the blob driver (ledger/driver.Bucket) on a Google Cloud
// Storage bucket, through the official client, cloud.google.com/go/storage, on
// GCS's JSON API over HTTP (storage.NewClient; not its gRPC transport). It is
// used through a ledger.Bucket (blobs.Open), which checks keys and the
// context, retries and verifies: the driver only speaks GCS.
//
// Keys live below an optional prefix in the bucket: with Prefix "ledgers/prod", key
// "blobs/sha256/ab/ab12…" is the object "ledgers/prod/blobs/sha256/ab/ab12…".
//
// # Credentials
//
// Unless Config supplies an HTTP client, the store authorizes requests as the
// storage client does. The client is made on the store's first use, not by
// New, so a command that opens the store and reads nothing looks for no
// credentials. Application Default Credentials are found in this order —
// GOOGLE_APPLICATION_CREDENTIALS naming a credential file (a service account
// key, an authorized user, an external_account file of workload identity
// federation, or an impersonated_service_account file), gcloud's
// application-default credentials (`gcloud auth application-default login`,
// with `--impersonate-service-account` for impersonation), then the metadata
// server (Compute Engine, Cloud Run, GKE workload identity).
// STORAGE_EMULATOR_HOST points it, without credentials, at an emulator such as
// fake-gcs-server.
//
// # Puts
//
// A put goes through the client's Writer. A GCS object appears only when its
// upload is finalized, and the Writer finalizes only when it is closed: an
// object up to Config.ChunkSize (16 MiB) goes in one request sent at Close; a
// larger one is a resumable upload in chunks of ChunkSize (the memory a put
// holds) whose last chunk is sent at Close. Close is called only after the
// caller's reader has returned io.EOF at the declared size within the context;
// on any failure before that the Writer's context is cancelled instead, so
// nothing (or the previous generation of the key) stays visible. The client
// sends the content's CRC32C with the upload for GCS to check; the store checks
// the size GCS answers with.
//
// # Gets
//
// A get streams the object as stored (never transcoded); the client's reader
// checks the CRC32C GCS reports at the end (a mismatch is a read error, never
// silently wrong bytes) and resumes a download whose connection broke with a
// ranged request for the rest.
//
// # Errors and retries
//
// ErrorCode maps a missing bucket to ledger.ErrNoBucket (an object's 404,
// which GCS gives for a missing bucket too, asks the bucket's attributes once,
// until the bucket has been seen), a missing object to ledger.ErrNotFound,
// and 401 and 403 to ledger.ErrPermission. Other answers are errors carrying
// the HTTP status (HTTPStatusCode, which ledger.DefaultRetryable reads) and
// GCS's message. The client's own retries are turned off, so that there is
// one retry layer: the ledger.Bucket's (ledger.RetryPolicy).
package gcsblob

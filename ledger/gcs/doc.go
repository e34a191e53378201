// Package gcs is the ledger.ObjectStore on a Google Cloud Storage bucket, through
// GCS's JSON API over net/http.
//
// It does not use cloud.google.com/go/storage: that client links gRPC,
// OpenTelemetry and their protobuf registries, whose package initialisation every
// syncledger command paid at start whether it used GCS or not (issue 17: the
// binary went from 87 to about 50 MB). The store needs six requests: a media
// upload, a resumable upload, a download, a metadata get, a delete and a list.
//
// Keys live below an optional prefix in the bucket: with Prefix "ledgers/prod", key
// "blobs/sha256/ab/ab12…" is the object "ledgers/prod/blobs/sha256/ab/ab12…". New
// authorizes requests with Application Default Credentials
// (golang.org/x/oauth2/google: GOOGLE_APPLICATION_CREDENTIALS, gcloud's
// application-default login, or the metadata server) unless Config supplies an
// HTTP client. STORAGE_EMULATOR_HOST points it, without credentials, at an
// emulator such as fake-gcs-server.
//
// # Puts
//
// A GCS object appears only when its upload is finalized. An object up to
// Config.ChunkSize (16 MiB) goes in one request whose last byte is sent only after
// the caller's reader has returned io.EOF at the declared size; a failure before
// that breaks the request and nothing is stored. A larger object, or one of
// unknown size, is a resumable upload in chunks of ChunkSize (the memory a put
// holds), finalized by the request carrying the last byte, sent only after the
// reader ended without error within the context; on any failure the session is
// cancelled, so nothing (or the previous generation of the key) stays visible. The
// object resource GCS answers with is checked against the size and CRC32C sent.
//
// # Gets
//
// A get streams the object and, at its end, checks the length and the CRC32C GCS
// reports (X-Goog-Hash); a mismatch is a read error, never silently wrong bytes.
//
// # Errors
//
// HTTP 404 maps to ledger.ErrNotFound; deleting an absent object is not an error.
// Other answers are errors carrying the status and GCS's message. Failures caused
// by the context wrap its error. The store does not retry; the caller wraps it in
// ledger.NewRetryingStore.
package gcs

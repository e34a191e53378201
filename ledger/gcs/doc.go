// Package gcs is the ledger.ObjectStore on a Google Cloud Storage bucket, through
// cloud.google.com/go/storage.
//
// Keys live below an optional prefix in the bucket: with Prefix "ledgers/prod", key
// "blobs/sha256/ab/ab12…" is the object "ledgers/prod/blobs/sha256/ab/ab12…". New
// builds a client from Application Default Credentials unless Config supplies one;
// the library honours STORAGE_EMULATOR_HOST, which points it at an emulator such as
// fake-gcs-server.
//
// # Puts
//
// A GCS object appears only when its upload is finalized, which the storage Writer
// does on Close. PutObject streams the caller's reader into a Writer and calls Close
// only after the reader has returned io.EOF without error, within the context and
// with the declared size; on any failure it cancels the Writer's context instead,
// which abandons the upload, so nothing (or the previous generation of the key)
// stays visible. Objects up to 16 MiB are sent in one request; larger ones as a
// resumable upload in 16 MiB chunks, finalized by the last.
//
// # Errors
//
// storage.ErrObjectNotExist maps to ledger.ErrNotFound; deleting an absent object is
// not an error. Failures caused by the context wrap its error.
package gcs

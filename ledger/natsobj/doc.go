// Package natsobj is the ledger.ObjectStore on a NATS JetStream object store bucket,
// through nats.go's jetstream package.
//
// Each key is one object of the bucket, named by the key itself: object names may
// contain "/" (the object store encodes names before it puts them in subjects), so
// "blobs/sha256/ab/ab12…" is stored as is. New opens the bucket, creating it with
// Config.Replicas if it does not exist.
//
// # Puts
//
// The object store sends an object as chunks on a fresh subject and then publishes
// its metadata, which is what makes the new version visible (and purges the old
// version's chunks); a put that fails before that purges its own chunks and leaves
// the previous version in place. PutObject hands the object store a reader that
// fails, instead of returning io.EOF, when the caller's reader fails, when the
// context is done, or when the content's length differs from the declared size, so
// none of those reaches the metadata step. The object store itself runs on a
// context stripped of the caller's cancellation (bounded by the JetStream default
// timeout instead): cancellation is enforced through the reader, and the cleanup of
// a failed put's chunks is not itself cancelled.
//
// # Reads
//
// A GetObject's reader is bound to a context for its whole life (the object store
// streams chunks through a consumer). If the caller's context has no deadline,
// Config.ReadTimeout (default DefaultReadTimeout) bounds the read. The object store
// checks the object's SHA-256 at the end of the read; a mismatch is reported as
// ledger.ErrChecksum.
//
// # Errors
//
// jetstream.ErrObjectNotFound maps to ledger.ErrNotFound; deleting an absent object
// is not an error. Failures caused by the context wrap its error.
package natsobj

// Package natsblob is the blob driver (ledger/driver.Bucket) on a NATS
// JetStream object store bucket, used through a ledger.Bucket (blobs.Open,
// with the NATS adapter's Client.ObjectStore), which checks keys and the
// context, retries and verifies.
//
// It keeps the object store's layout, so nats.go's object store and the nats CLI
// read its buckets: each key is one object, whose content is sent as chunks of
// 128 KiB on a fresh subject $O.<bucket>.C.<nuid> and whose metadata (name, size,
// chunk count, SHA-256 digest) is then published on $O.<bucket>.M.<base64url
// name>. Object names may contain "/", so "blobs/sha256/ab/ab12…" is stored as
// is. New opens the bucket, creating it with Config.Replicas if it does not
// exist.
//
// # Written once
//
// Objects here are written once (blobs are content-addressed), and a user
// allowed to put objects must not be able to alter or erase one (docs/ops.md,
// Threat model). So, unlike nats.go's object store:
//
//   - The bucket's stream refuses roll-ups and message deletes (StreamConfig;
//     Harden sets this on a bucket made elsewhere). A put never rolls up: the
//     metadata message is appended.
//   - A reader takes an object's first metadata message that does not mark it
//     deleted, and reads exactly the chunks it names; whatever is published
//     later on the object's subjects does not change what it reads. A later copy
//     of the same metadata (a put of the same content again) only moves the
//     object's time, which garbage collection reads.
//   - Putting other content under a stored key, and Delete, purge the
//     object's subjects: only the admin role may purge.
//
// A put that fails before its metadata is stored leaves its chunks behind,
// unreferenced: a user who may only put cannot purge them.
//
// # Puts
//
// Put reads through the ledger.Bucket's reader, which fails, instead of returning io.EOF, when
// the caller's reader fails, when the context is done, or when the content's
// length differs from the declared size, so none of those reaches the metadata
// step. Chunks are published asynchronously, at most 64 awaiting their
// acknowledgement.
//
// A batch (NewBatch, driver.Batch) puts the same way, chunks awaited
// before the metadata is published — an object's metadata never names chunks
// the stream has not acknowledged — but leaves the metadata's acknowledgement
// to Flush, which awaits all of them at once: a small object's put is one
// round trip, not two. The batch's Stat of a blob key asks first whether
// any metadata message names it, the questions asked at once gathered into one
// batched direct get (multi_last, up to 256 subjects): a new blob costs no
// request of its own, and a key found absent is put without asking again. A
// key something names gets the full Stat, and the ledger.BlobBatch reads its
// content back before trusting it (a squatted key never is). A put reads into
// a buffer the size of the object when it is smaller than a chunk.
//
// # Reads
//
// A Get's reader is bound to a context for its whole life (each chunk is
// a direct get of the next message on the object's chunk subject: no consumer
// per read). If the caller's context has no deadline,
// Config.ReadTimeout (default DefaultReadTimeout) bounds the read. The object's
// size and SHA-256 are checked at the end of the read; a mismatch is reported as
// ledger.ErrChecksum.
//
// List reads the bucket's metadata whole, in the order stored, by
// batched direct gets of its subjects (ledger/natsjs/directget; leader gets,
// one per message, on a bucket that does not allow direct gets): no consumer,
// so no listing — a snapshot listing, a cold sync's, gc's — holds state on
// the server, and any number of hosts list at once.
//
// # Errors
//
// A bucket whose stream is gone is ledger.ErrNoBucket (a request no stream
// answered is followed by one question to the JetStream API, so that a server
// that does not answer stays transient). A permission violation reaches the
// client asynchronously, as the connection's error: the NATS adapter maps
// those. An absent object is ledger.ErrNotFound; deleting an absent object is not an
// error.
package natsblob

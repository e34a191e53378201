// Package natsjs is the ledger.CommitLog on NATS JetStream: one stream per
// ledger, one message per (commit, partition), the per-partition chain enforced
// by the server at write time; and beside it the ledger's other ports on NATS:
// the Feed (durable pull consumers of the stream, the dead-letter stream) and
// the side buckets as ledger.KV (KV, BucketKV: the heartbeats' and swamp's).
// Every name a ledger keeps on a server is in names.go, which natsauth grants.
// It is the only package of the module, besides the object-store blob backend
// (natsblob, which it opens), the embedded server and natsauth (the names),
// that imports nats.go: cmd/syncledger imports none (.ci/run checks).
//
// # The Client
//
// Open(ctx, Config) is the one constructor an application needs. Config is
// plain data: a Write endpoint and an optional Read one (URLs, a token, a user
// and password, a credentials file, an nkey seed or seed file, TLS files; or
// the embedded server in process, embedded.Server.Endpoint), a connection
// name, timeouts, and a Refused callback. The Client it returns connects (one
// connection; a second only when Read is set, for the log's direct gets) and
// sends no request until asked for a resource:
//
//	c, err := natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: url, CredsFile: creds}})
//	lg := c.Ledger("prod")
//	log, err := lg.Log(ctx)          // the CommitLog (Create makes the ledger: the admin)
//	feed, err := lg.Feed()           // the Feed
//	beats, err := lg.Heartbeats()    // ledger.KV, opened on first use
//	swamp, err := lg.SwampKV(ctx)    // ledger.KV
//	objs, err := c.ObjectStore(ctx, bucket, replicas) // a nats:// blob store
//
// The Log is the portable ledger.Log over this package's JetStream driver
// (ledger.LogDriver), which therefore never checks a call's context or
// arguments again (a commit comes to it checked and encoded); beside it the
// Log carries the adapter's own operations: the partition list (Partitions),
// MirrorHead, ServerState, RaiseFormat, MarkNamespace, Delete. The Feed is
// the portable ledger feed (ledger.PortableFeed) over its JetStream driver
// the same way. OpenLog, CreateLog, NewFeed
// and HeartbeatKV build the same on a *nats.Conn the caller holds
// (tests, benchmarks).
//
// Every resource opened is checked against the configuration syncledger
// creates it with (expect.go, one table per resource: the ledger's stream,
// the key-value buckets, the dead-letter stream, the object store, a durable
// consumer): a mismatch, or a resource missing, is a *ledger.ConfigError
// naming the resource, the setting, the values found and wanted, and what
// repairs it (syncledger upgrade). The checks read the stream info that
// opening reads anyway. Only the admin makes or changes a resource
// (natsauth): CreateLog makes a ledger's stream with its heartbeat and swamp
// buckets and its dead letters, Ledger.Upgrade and Client.UpgradeObjectStore
// make an existing one's as this build makes them, Feed.Create makes a
// consumer; nothing else here creates a stream or a consumer, and a
// Subscribe whose create the server refuses is a *ledger.NoConsumerError.
//
// The server refuses an operation for lack of permission without answering
// it: it reports the violation on the connection. refusal.go reads that
// report, in one place, into a *ledger.PermissionError (the verb and the
// subject); a Client fails the operation watching that subject at once (every
// key-value bucket operation), and hands a refusal nobody claimed to
// Config.Refused. A failed connect is a *ConnectError whose Cause says what to
// check (the server, the credentials, TLS).
//
// # Stream layout
//
// A ledger named <name> is the stream SYNCLEDGER_<name> (ledger.StreamName) bound
// to the subjects
//
//	syncledger.<name>.p.>
//
// Each event is one message on syncledger.<name>.p.<token>, where token is the
// partition key escaped by ledger.EscapeToken (one subject token; no key can
// produce ".", "*", ">", "$", whitespace or non-ASCII, so a partition's filter
// never matches another partition). The body is ledger.EncodeEvent's JSON.
// Subjects longer than MaxSubjectLen are refused (ErrTooLarge): the server closes
// the connection of a client whose protocol line exceeds max_control_line.
//
// Stream settings: file storage, limits retention, discard old, no message,
// byte or per-subject limits, MaxAge from LedgerConfig (0 = forever), duplicate window
// 2 min (DuplicateWindow), DenyDelete (no interior holes), AllowDirect (reads by
// direct get), AllowAtomicPublish (multi-partition commits), and a RePublish of
// every stored message, headers and body, to syncledger.<name>.stored.<token>
// (StoredPrefix; what followers read, see Following). Metadata:
//
//	syncledger.name    the ledger name
//	syncledger.uuid    the ledger's lineage, fixed at creation
//	syncledger.format  the log format (ledger.LogFormat; 2 holds fences, raised by RaiseFormat)
//	syncledger.blobs   the blob store URL
//
// and on a swamp namespace's ledger, from its creation (ledger.Info; an older
// one is marked by MarkNamespace):
//
//	syncledger.namespace-of  the UUID of the ledger it is a namespace of
//	syncledger.namespace     the namespace
//
// Open refuses a stream without them, one whose format is newer than this build
// (ErrUnknownVersion), or one without atomic publish, direct get, the subject
// binding or the republish (ErrInvalid: a *ledger.ConfigError naming the
// repair; Ledger.RePublish adds the republish to a ledger made before it).
//
// # Publishing
//
// A single-partition commit is one publish; a commit of k ≤ ledger.MaxBatch
// (1000, the server's atomic batch limit) partitions is one JetStream atomic
// batch (all k stored or none, at consecutive seqs; Nats-Batch-Id,
// Nats-Batch-Sequence and Nats-Batch-Commit, the id 128 random bits: the
// server keys a batch in flight by its id alone, so no other user may know
// it before the batch is stored — none subscribes to the ledger's publish
// subjects, and orbit.go's nuid ids could be guessed from a process's
// stored batches). More than
// MaxBatch partitions is refused with an error wrapping ledger.ErrTooLarge that
// names the limit: nothing atomic spans more. A host publishes a wider change
// as several commits, each one batch and atomic on its own (host.Commit);
// Append sees each as a commit of its own. Every message carries:
//
//	Nats-Msg-Id                           <commit uuid>/<part>[.<nonce>]
//	Nats-Expected-Stream                  SYNCLEDGER_<name>
//	Nats-Expected-Last-Subject-Sequence   event.Prev
//
// Any user that may publish to the stream may publish under any message id,
// and within the stream's duplicate window the server drops whatever else
// carries an id it holds, answering "duplicate": a duplicate answer is never
// taken for the commit stored. Append resolves it as any unclear answer (below);
// when the commit is nowhere and no partition moved, another user's message
// holds its ids, and it publishes again under ids with a nonce of 128 random
// bits. (Commit ids are UUIDv7s, 62 random bits: no user can know one before
// the server stores its commit, since none sees a publish in flight.) A
// quarantine notice's id carries a nonce too, and a dead letter's duplicate
// is taken only when the message holding its id is on its own subject.
//
// The server checks the last one per message (in a batch, on every message,
// before committing any): an event is stored only if its Prev is its partition's
// last seq. Prev 0 means "the partition has no message": measured on 2.15.2, the
// server accepts 0 on an empty subject and refuses it ("wrong last sequence: N",
// err 10071) once the subject holds a message. A refused batch stores nothing,
// and answers with one error (10071 carrying the offending partition's last seq,
// but not its subject).
//
// # Ambiguous outcomes
//
// A publish can end without a clean ack: a timeout, a lost connection, no
// responders during a leader election, too many batches in flight, or an answer
// that depends on the topology — measured on 2.15.2, one node answers a retry of
// a stored message with "wrong last sequence" (10071, the expected-seq check runs
// before the dedupe check), three replicas answer it with a duplicate ack, and a
// retried atomic batch is answered "duplicate message id" (10201). Append never
// decides by that text. It reads, through the stream leader
// ($JS.API.STREAM.MSG.GET, not a possibly lagging replica), the first message
// after Prev on part 1's subject. The server stores an event only when Prev is
// its partition's last seq, so that message is part 1 exactly when the commit is
// stored — even if other commits have extended the partition since, which is
// why Append does not just compare the partition's head. An atomic batch is all
// or nothing at consecutive seqs, so part 1 at seq s means the commit is at
// s..s+k-1 (the last part is read too, to see it applied). Part 1 found: success,
// with those seqs. Not found: the partition whose last seq is not its event's
// Prev is a *ledger.ConflictError with that last seq as Actual — after looking
// for part 1 once more, since an earlier attempt still in flight may have landed
// in between and moved the partitions itself. No such partition: not stored;
// publish again, with the same message ids, up to WithRetry attempts with
// backoff, honoring ctx. When the outcome stays unknown (ctx ended, attempts
// exhausted) the error wraps ErrOutcomeUnknown; appending the same events again
// resolves it the same way.
//
// An operation of the log or of a KV bucket that could not reach the server —
// the connection closed or reconnecting, no server to connect to, or no answer
// while the connection was down — wraps ledger.ErrUnreachable (an answer saying
// no never does), so callers tell a dead server from a refusal by type, not by
// the text of nats.go's errors.
//
// # Reading and the first-seq check
//
// LastSeq and Bounds are one stream info request to the stream leader (no
// subject or deleted details): the cheapest authoritative answer. Measured with
// BenchmarkLastSeq on one local node: about 95–140 µs; a direct get of the
// stream's last message (last_by_subj "syncledger.<name>.p.>") is 55–90 µs when
// the last event is small but about 450 µs when it is 170 KB, since it returns the
// whole event, and it may be answered by a lagging replica. PartitionLastSeq and
// PartitionHead are one direct get of the subject's last message (about 55 µs),
// possibly a few milliseconds stale on a replicated stream. Read and
// ReadPartition use batched direct gets ($JS.API.DIRECT.GET.<stream> with seq,
// next_by_subj, batch and max_bytes; server ≥ 2.11), so their cost is
// proportional to the records returned; each batch is collected before fn sees
// it, and a timeout is an error, never a short batch (why this package does not
// use orbit.go's GetBatch, which ends quietly on a timeout). Read reads up to the
// leader's last seq and ReadPartition up to the leader's last seq of the subject,
// waiting for a lagging replica. Follow is below (Following).
//
// A direct get's answer states the message's stream, subject and seq in
// headers the server adds after the ones the message was published with, so
// a publisher may write headers of the same names first, or a header block
// with a blank line that hides the server's from nats.go's parser. An answer
// is taken only when its header block was parsed whole (directget.WholeHeader),
// each of those appears exactly once, names the stream, and the message sits
// where the request puts it (the seq after the one before, on the subject
// asked for); any other is asked of the stream leader ($JS.API.STREAM.MSG.GET,
// JSON: the seq and subject are the server's). A message stored with forged
// headers is thus read where it is, and refused as the event it is not — the
// admin's quarantine, which reads it the same way, is the way out.
//
// JetStream silently starts a read at the first stored seq when the asked-for
// one is gone. So every read first compares from with the stream's first seq
// (below it: *ledger.TruncatedError, fn never called; for ReadPartition too,
// since the log cannot tell whether the partition had events there), and then
// checks what it is given: Read and Follow that seqs are contiguous,
// ReadPartition that each event's Prev is the seq of the one before it. A purge
// during the read is thus an error wrapping ledger.ErrTruncated, never a skip. A
// message that does not decode, sits on another partition's subject, or belongs
// to another lineage stops the read with an error naming its seq and wrapping
// ledger.ErrInvalid, ledger.ErrUnknownVersion or ledger.ErrLineage.
//
// # Following
//
// Follow holds no state on the server: no consumer (an ordered consumer per
// follower cost the server a consumer each, kept up to 5 minutes after the
// reader was gone, and nats-server caps a stream at 1,000). It subscribes to
// the stream's republish (StoredSubjects) — a plain subscription to the
// ledger's own subjects would also carry publishes the stream refused,
// without seqs — and, once the server has the subscription, reads from its
// start to the stream's head with Read (batched direct gets: the source of
// truth). Then it delivers each republished message whose Nats-Sequence is
// the seq due, its Nats-Stream this stream and its Nats-Subject the subject
// the republish subject was made from (each header exactly once). The
// republish is best effort: only the stream leader sends it, and a subscriber
// loses what was sent while it was slow (past its pending limit the client
// drops messages) or reconnecting. So a seq past the one due, a message the
// client dropped or a reconnect (local counters, no request), a republished
// message that does not read cleanly, and an idle period (WithFollowIdle,
// default 5 s ±20%: one STREAM.INFO) each send the follower back to Read
// from the seq due. Nats-Last-Sequence, which the server sets to the
// previous seq of the same subject (a partition's: the event's Prev), is not
// needed: the stream's seqs are gapless, so contiguity of Nats-Sequence is
// the check. Measured (BenchmarkFollowLatency, one local node, on a loaded
// 2-CPU machine): an append reaches 1 follower at p50 0.3 ms, as the ordered
// consumer did, and 100 followers at p50 3.8–3.9 ms, p99 18–28 ms (the
// ordered consumers: 5.6–6.6 ms, 37–47 ms).
//
// Listings hold no state either (ledger/natsjs/directget): a key-value
// bucket's keys (KV.List) are multi-last direct gets, paged by seq, and a
// scan by subject past the 1,024 subjects one answer holds; the dead
// letters (Feed.DeadLetters) a batched scan of their subject.
//
// # Retention
//
// The stream drops events only through MaxAge or an operator's purge. Dropping a
// partition's last event lets its chain restart at Prev 0 — the server cannot
// tell an emptied subject from a new one — so MaxAge must stay 0 unless
// snapshots cover everything it can drop (docs/design.md §6).
//
// # A full server
//
// A write the server has no room for is refused, not retried: err_code 10002
// (a full serve closed its store: embedded's disk watch), 10023 or 10047 (a
// store limit of a nats-server of its own) is a *ledger.ServerFullError
// (ServerFull; natsblob maps the same codes). An append's error carries what
// the server says of its disk; Ledger.ServerState asks it for the others (one
// $JS.API.INFO request, which every role may send: a full store's limit is
// reached; then, while it is full, up to 1 s for serve's word on the ledger's
// server subject, which every role may read and only an admin may publish).
//
// # Timeouts
//
// Every method takes ctx first. When ctx has no deadline, each request to the
// server is bounded by WithTimeout (default 5 s); Read, ReadPartition and Follow
// are bounded only by ctx.
package natsjs

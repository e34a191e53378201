// Package consumers makes a ledger a dependable change feed: a Runner runs a
// Handler on a durable consumer of the ledger's Feed (ledger.Feed), one commit at
// a time, and the subpackages are the built-in handlers (audit, webhook, metrics)
// and the hosts' heartbeats (heartbeat, on a ledger.KV).
//
// It speaks only the ports: a Runner takes a ledger.Feed and a
// ledger.CommitLog, which the command's assembly opens on NATS
// (natsjs.Open's Client: Ledger.Feed, Ledger.Log) and tests on ledger/memledger. Commits are
// grouped by ledger.Commits, the one grouper. What follows is the protocol on
// any Feed; on JetStream a consumer is a durable pull consumer of the ledger's
// stream and the dead letters a stream of their own (ledger/natsjs).
//
// # Ordering
//
// A Runner hands its Handler whole commits (Commit: the parts it receives, in seq
// order) strictly in seq order, one at a time. A commit touching k partitions is
// k events at consecutive seqs; the Runner holds the first parts until the last
// one it will receive has arrived (ledger.Commits, filtered: a consumer may
// start inside a commit). A consumer filtered to some partitions
// (Config.Partitions, or a model's partitions from ledger.PartitionKeysForModel)
// receives only those parts; to know when it has them all it reads the commit's
// other parts from the log (Commits.Until). Commit.Seq is always the commit's seq (its last
// part's), filtered or not.
//
// # Acknowledgement
//
// The feed acknowledges "all up to": the Runner acknowledges a
// commit's last event only after the handler returned nil for it — and, for a
// handler that buffers (Flusher), only after Flush returned nil — which also
// acknowledges everything before it. Without a Flusher each commit is
// acknowledged as soon as it is handled; with one, acknowledgements are sent
// after each Flush, which the Runner calls when no further message is waiting,
// every Config.FlushEvery commits, before a retry or a dead letter, and on
// shutdown. Acknowledgements are not waited for: one that is lost means the
// commit is delivered again.
//
// # Redelivery and dead letters
//
// A handler error is retried in the Runner, with the same commit, after
// Config.BackOff (1 s, 5 s, 30 s, 1 min, the last repeating), up to
// Config.MaxDeliver attempts (5); the consumer waits meanwhile — later commits
// are not handed over before it, so order holds — and the Runner keeps telling
// the feed the commit is in progress so that its ack wait does not expire. An
// error wrapping ErrPermanent skips the retries. After the last attempt the
// commit's events and the error are stored, as a DeadLetter, in the feed's dead
// letters (on JetStream: syncledger.<ledger>.dlq.<consumer>, kept by the stream
// SYNCLEDGER-DLQ_<ledger>, made with the ledger by the admin, outside the
// ledger stream's subjects); then the events are acknowledged and the Runner moves on. A message
// that does not decode is dead-lettered at once. Positions reports each
// consumer's position and dead-letter count, ReadDeadLetters reads them back.
//
// # Crash and restart
//
// Delivery is at least once. On start the Runner resets its consumer to the
// consumer's ack floor, so delivery resumes at the first event not
// acknowledged, in seq order (the server would otherwise deliver later events
// first and the held ones only after their ack wait). Commits handled but not
// acknowledged when a run ended are therefore handed over again, in order,
// before any later one: a handler that must act once per commit (audit) skips
// commits whose Commit.Seq is at or below the last one it recorded. Graceful
// shutdown (the Run context cancelled) lets the handler call in progress finish
// (up to Config.DrainTimeout), flushes, acknowledges, and leaves a partly
// received commit unacknowledged. A truncation of the log past a consumer's
// position moves the position to the first event the log holds (a JetStream
// purge moves the consumer's ack floor; ledger.Feed): the dropped commits are
// never handed over, and a handler that must see every seq checks for gaps
// itself, as the audit consumer does (consumers/audit.GapError). A new
// consumer started at a seq the log no longer holds fails with
// ledger.ErrTruncated. Run one Runner per consumer name at a time.
package consumers

// Package embedded runs syncledger's default deployment: an in-process nats-server
// with JetStream, its data under one directory.
//
// Start validates its Config, takes an exclusive lock on the data directory (an
// flock on DataDir/serve.lock holding the owner's pid), and only then opens the
// JetStream store: nats-server itself takes no such lock, and two servers opened on
// one directory were seen accepting writes side by side, which corrupts the store.
// The lock is released by Shutdown, or by the kernel when the process dies, so a
// crash never leaves a stale lock behind.
//
// Start refuses to listen on anything but a loopback address unless client
// authentication (a token, a user and password, Users, or verified client
// certificates) is configured: an unauthenticated ledger reachable from the
// network would let anyone rewrite every host's files.
//
// Users each carry their own subject permissions, typically a natsauth role's
// (host, tooling). With Users set, Connect logs in as an internal unrestricted
// user whose random password exists only in this process. TLS (a server
// certificate, optionally a CA that client certificates must chain to) applies to
// TCP clients; the in-process connection needs none.
//
// A full disk. nats-server, left alone, answers no write that finds its disk
// full (the client waits out its timeout), keeps the error in that stream for
// good (every later write fails the same way, after space is freed too), and
// takes as its store limit, for good, 75% of the space free when it started.
// So Start lifts that limit and watches the data directory's filesystem
// instead (disk.go): below Config.Reserve of free space it closes the store
// to writes (the account's store limit set to 0: every publish is refused at
// once with err_code 10002, which clients map to ledger.ErrServerFull; reads,
// deletes and purges go on), and says so on each ledger's server subject
// (natsjs.ServerSubject) every half second, with the directory, the free space
// and where writes resume; at 1.5 × Reserve it opens the store again. A write
// that failed for lack of space before the watch saw it (nats-server logs it:
// the log adapter wakes the watch) leaves its stream broken until JetStream
// reopens it: once space is back, the watch restarts JetStream in process
// (ShutdownJetStream, EnableJetStream: every stream reopened from disk with
// every acknowledged message, clients' connections kept). Server.Disk returns
// what the watch sees.
//
// The package never logs except through the *slog.Logger it is given, and never
// installs signal handlers; its caller owns the process.
package embedded

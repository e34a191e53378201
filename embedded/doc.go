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
// The package never logs except through the *slog.Logger it is given, and never
// installs signal handlers; its caller owns the process.
package embedded

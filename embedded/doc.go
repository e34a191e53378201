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
// authentication (a token, or a user and password) is configured: an
// unauthenticated ledger reachable from the network would let anyone rewrite every
// host's files.
//
// The package never logs except through the *slog.Logger it is given, and never
// installs signal handlers; its caller owns the process.
package embedded

// Package memledger is the in-memory twin of the ledger's ports, for tests: a
// ledger.KV whose clock the test holds (NewKV), and — as the ports redesign
// (issue 28) goes on — the commit log, the feed and the object store. Each
// type passes the same conformance suite (internal/ledgertest) as its NATS
// adapter in ledger/jetstream, so a test on the twin tests what production
// runs; a real server stays only where the adapter itself is the subject.
//
// Nothing here is linked into the syncledger command.
package memledger

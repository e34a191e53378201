// Package memledger is the in-memory twin of the ledger's ports, for tests: the
// commit log (Log; knobs LoseAck, Publish and Rewind), its feed (Feed: durable
// consumers, acknowledgement, ack waits on the feed's clock, dead letters;
// knobs Disconnect and Reset) and a ledger.KV whose clock the test holds
// (NewKV). Log and Feed are the portable ledger.Log and ledger.PortableFeed
// over in-memory drivers, as the NATS adapter's are over its JetStream
// drivers: the checks every log and feed makes run in the portable types,
// not here. Each
// type passes the same conformance suite (ledger/drivertest) as its NATS
// adapter in ledger/natsjs, so a test on the twin tests what production
// runs; a real server stays only where the adapter itself is the subject.
//
// Nothing here is linked into the syncledger command.
package memledger

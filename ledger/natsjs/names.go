package natsjs

import "github.com/syncledger/syncledger/ledger"

// The names of everything a ledger keeps on a NATS server, in one place:
// natsauth grants its permissions on these, and nothing else spells them.
//
//	SYNCLEDGER_<ledger>             the ledger's stream (ledger.StreamName)
//	syncledger.<ledger>.p.<token>   a partition's events (ledger.Subject)
//	syncledger.<ledger>.p.~q        quarantine notices (ledger.QuarantineSubject)
//	syncledger.<ledger>.p.~f<lock>  a lock's fence records (ledger.FenceSubject)
//	syncledger.<ledger>.p.~c        fenced commits' fence checks (ledger.FenceCheckSubject)
//	syncledger.<ledger>.stored.>    the stream's republish of what it stored (StoredSubjects)
//	SYNCLEDGER-DLQ_<ledger>         the feed's dead letters (DeadLetterStream)
//	syncledger.<ledger>.dlq.<name>  a consumer's dead letters (DeadLetterSubject)
//	syncledger.<ledger>.server      what serve says of its disk (ServerSubject)
//	SYNCLEDGER_HOSTS_<ledger>       the host heartbeats' bucket (HeartbeatBucket)
//	SYNCLEDGER_SWAMP_<ledger>       swamp's locks and control plane (SwampBucket)
//	KV_<bucket>, $KV.<bucket>.>     a key-value bucket's stream and subjects
//	<name>                          a feed consumer: a durable consumer on the ledger's stream
const (
	// KVStreamPrefix begins the stream of a key-value bucket (KV_<bucket>).
	KVStreamPrefix = "KV_"
	// KVSubjectPrefix begins a key-value bucket's subjects ($KV.<bucket>.<key>).
	KVSubjectPrefix = "$KV."
)

// StreamName returns the ledger's stream (ledger.StreamName).
func StreamName(ledgerName string) string { return ledger.StreamName(ledgerName) }

// DeadLetterStream returns the stream keeping a ledger's dead letters. Its
// prefix "SYNCLEDGER-DLQ_" cannot be a ledger's stream name
// ("SYNCLEDGER_<ledger>"), whatever the ledger is called.
func DeadLetterStream(ledgerName string) string { return "SYNCLEDGER-DLQ_" + ledgerName }

// DeadLetterSubject returns the subject of a consumer's dead letters
// (consumer ">": every consumer's), outside the ledger stream's
// syncledger.<ledger>.p.> subjects.
func DeadLetterSubject(ledgerName, consumer string) string {
	return ledger.SubjectRoot + "." + ledgerName + ".dlq." + consumer
}

// StoredPrefix returns the prefix of the subjects the ledger's stream
// republishes each message it stores to (its RePublish, expect.go):
// "syncledger.<ledger>.stored.", then the stored message's partition token.
// Every role may subscribe to them, none below admin publish to them
// (natsauth): a message there was stored by the stream, at the seq its
// Nats-Sequence header states. They are outside the stream's own subjects
// (syncledger.<ledger>.p.>), as the server requires of a republish (no
// cycle), and outside the dead letters' (syncledger.<ledger>.dlq.>).
func StoredPrefix(ledgerName string) string {
	return ledger.SubjectRoot + "." + ledgerName + ".stored."
}

// StoredSubjects is the filter of every subject StoredPrefix begins.
func StoredSubjects(ledgerName string) string { return StoredPrefix(ledgerName) + ">" }

// HeartbeatBucket returns the key-value bucket of a ledger's host heartbeats.
func HeartbeatBucket(ledgerName string) string { return "SYNCLEDGER_HOSTS_" + ledgerName }

// SwampBucket returns the key-value bucket of a ledger's swamp locks and
// control plane.
func SwampBucket(ledgerName string) string { return "SYNCLEDGER_SWAMP_" + ledgerName }

// KVStream returns the stream of a key-value bucket.
func KVStream(bucket string) string { return KVStreamPrefix + bucket }

// ServerSubject returns the subject on which serve tells a ledger's clients
// what it knows of its disk (a ledger.ServerState as JSON, twice a second while
// the disk is full, and once when writes are taken again). It is no stream's:
// nothing stores it. Every role may subscribe to it (syncledger.<ledger>.>),
// only an admin may publish on it.
func ServerSubject(ledgerName string) string {
	return ledger.SubjectRoot + "." + ledgerName + ".server"
}

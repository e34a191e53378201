// Package natsauth defines the NATS subject permissions of syncledger's roles and
// renders them as a nats-server authorization block.
//
// A role's permissions are scoped to one ledger (Scope): its stream, its hosts'
// heartbeat bucket, its consumers' dead-letter stream and, when the ledger's blobs
// live in a NATS object store, that bucket. NATS wildcards match whole subject
// tokens only ("SYNCLEDGER_*" is not a wildcard), so per-ledger lists are also the
// only way to name a ledger's streams without naming every stream.
//
// The roles:
//
//   - admin: no restriction. Creates ledgers (init, serve), purges the stream
//     (snapshot --retain-margin), collects blobs (gc), forgets hosts, deletes
//     consumers, quarantines a bad message (publishes on syncledger.<ledger>.p.~q).
//   - host: what a projector host needs for sync, commit, watch, exec, status,
//     rebuild: publish commits on syncledger.<ledger>.p.> (not the admin's
//     quarantine notices on .p.~q), write blobs to the
//     ledger's object store bucket (chunks and metadata, $O.<bucket>.C.> and
//     $O.<bucket>.M.>), put its heartbeat (creating the heartbeat bucket if it is
//     missing), use the ledger's swamp bucket (the swamp agent's locks, control
//     plane and namespace registry: SwampBucket, created if missing), and read
//     everything through the JetStream API (stream info,
//     direct and leader gets, ordered consumers). It cannot update, delete or
//     purge any stream, nor delete a message, nor delete or reset a durable
//     consumer: it cannot destroy or alter a
//     commit or a stored blob (the streams refuse roll-ups, and readers of the
//     object store keep an object's first metadata; see docs/ops.md, Threat
//     model).
//   - tooling: read-only monitoring and consumers (log, tail, hosts, consume,
//     the dashboard, metrics): stream info, gets and consumers on the ledger's
//     streams, acknowledgements, and its consumers' dead letters (publishing to
//     syncledger.<ledger>.dlq.> and creating the dead-letter stream once), and
//     resetting the ledger's durable consumers to their ack floor (what a
//     restarted consumer does). It cannot publish commits, write blobs or
//     heartbeats, delete a consumer, or create, update, delete or purge any
//     other stream; the deny lists say so explicitly, so a wider allow added by
//     hand cannot grant it.
//
// Every role subscribes to _INBOX.> for JetStream API answers. On a server shared
// with untrusted users, give each user its own inbox prefix instead (nats-server's
// allow_responses and a custom inbox prefix); see docs/ops.md.
//
// This package uses the standard library only; embedded converts Permissions to
// nats-server's options, and `syncledger config permissions` prints Render's
// output.
package natsauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// Role names a permission template.
type Role string

// The roles (see the package doc).
const (
	RoleAdmin   Role = "admin"
	RoleHost    Role = "host"
	RoleTooling Role = "tooling"
)

// Roles lists the roles in the order documentation shows them.
var Roles = []Role{RoleAdmin, RoleHost, RoleTooling}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(Roles, r) {
		return "", fmt.Errorf("role %q: want admin, host or tooling: %w", s, ledger.ErrInvalid)
	}
	return r, nil
}

// SubjectPermission is an allow and a deny list of subjects (deny wins).
type SubjectPermission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Permissions are a user's publish and subscribe permissions.
type Permissions struct {
	Publish   SubjectPermission `json:"publish"`
	Subscribe SubjectPermission `json:"subscribe"`
}

// Scope is what a role's permissions are for.
type Scope struct {
	// Ledger is the ledger name (ledger.ValidateName).
	Ledger string
	// ObjectBucket is the NATS object store bucket of the ledger's blobs (the
	// bucket of a nats://BUCKET blob URL); empty when the blobs live elsewhere.
	ObjectBucket string
}

// For returns role's permissions in scope; nil for admin (no restriction).
func For(role Role, s Scope) (*Permissions, error) {
	if err := ledger.ValidateName(s.Ledger); err != nil {
		return nil, fmt.Errorf("permissions: %w", err)
	}
	if s.ObjectBucket != "" && !validBucket(s.ObjectBucket) {
		return nil, fmt.Errorf("permissions: object store bucket %q: want letters, digits, '-' and '_': %w", s.ObjectBucket, ledger.ErrInvalid)
	}
	var (
		stream  = natsjs.StreamName(s.Ledger)
		commits = ledger.SubjectPrefix(s.Ledger) + ">"
		all     = ledger.SubjectRoot + "." + s.Ledger + ".>"
		dlq     = natsjs.DeadLetterSubject(s.Ledger, ">")
		kv      = natsjs.HeartbeatBucket(s.Ledger)
		kvStr   = natsjs.KVStream(kv)
		swamp   = natsjs.SwampBucket(s.Ledger)
		swStr   = natsjs.KVStream(swamp)
		dlqStr  = natsjs.DeadLetterStream(s.Ledger)
		objStr  = natsblob.StreamName(s.ObjectBucket)
	)
	streams := []string{stream, kvStr, dlqStr}
	if s.ObjectBucket != "" {
		streams = append(streams, objStr)
	}
	// Reading: stream info, gets, ordered and durable consumers, acks.
	read := []string{"$JS.API.INFO"}
	readOf := func(st string) {
		read = append(read,
			"$JS.API.STREAM.INFO."+st,
			"$JS.API.STREAM.MSG.GET."+st,
			"$JS.API.DIRECT.GET."+st,
			"$JS.API.DIRECT.GET."+st+".>",
			"$JS.API.CONSUMER.CREATE."+st,
			"$JS.API.CONSUMER.CREATE."+st+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+st+".>",
			"$JS.API.CONSUMER.INFO."+st+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+st+".>",
			"$JS.API.CONSUMER.NAMES."+st,
			"$JS.API.CONSUMER.LIST."+st,
			"$JS.ACK."+st+".>",
			"$JS.FC."+st+".>",
		)
	}
	for _, st := range streams {
		readOf(st)
	}
	sub := SubjectPermission{Allow: []string{"_INBOX.>", all}}
	// Never granted to host or tooling: changes to the ledger's stream.
	noStreamChanges := []string{
		"$JS.API.STREAM.UPDATE.>",
		"$JS.API.STREAM.DELETE.>",
		"$JS.API.STREAM.MSG.DELETE.>",
		"$JS.API.STREAM.PURGE." + stream,
	}
	// Never granted to host or tooling: deleting a durable consumer (a
	// webhook's or the audit's), or moving one the host does not run. Deleting
	// is the admin's (`consume delete`); the tooling role resets the ledger's
	// consumers it runs to their ack floor when they start (consumers.Runner),
	// and the audit consumer refuses to record past a gap a moved position
	// leaves (consumers/audit).
	// The key-value buckets hold no durable consumer of ours, only the
	// ordered ones nats.go makes for a watch or a key listing, which it deletes
	// when the watch stops (a refused delete waits out the request timeout):
	// deleting those is allowed (kvDelete).
	var noConsumerChanges []string
	for _, st := range streams { // the ledger's, its dead letters', its object store's
		if st == kvStr {
			continue
		}
		noConsumerChanges = append(noConsumerChanges, "$JS.API.CONSUMER.DELETE."+st+".>", "$JS.API.CONSUMER.RESET."+st+".>")
	}
	kvDelete := func(st string) string { return "$JS.API.CONSUMER.DELETE." + st + ".>" }
	switch role {
	case RoleAdmin:
		return nil, nil
	case RoleHost:
		pub := []string{commits, natsjs.KVSubjectPrefix + kv + ".>", "$JS.API.STREAM.CREATE." + kvStr,
			natsjs.KVSubjectPrefix + swamp + ".>", "$JS.API.STREAM.CREATE." + swStr, kvDelete(kvStr), kvDelete(swStr)}
		readOf(swStr) // swamp's control plane may hold secrets: hosts only
		if s.ObjectBucket != "" {
			// Writing a blob: its chunks, then its metadata. The bucket refuses
			// roll-ups and message deletes, and readers keep an object's first
			// metadata (ledger/natsblob), so these cannot alter a stored blob.
			pub = append(pub, natsblob.ChunkSubjects(s.ObjectBucket), natsblob.MetaSubjects(s.ObjectBucket))
		}
		// No purge of any stream: blobs are written once, and a host never
		// removes anything.
		deny := append([]string{"$JS.API.STREAM.PURGE.>"}, noStreamChanges[:3]...)
		deny = append(deny, noConsumerChanges...)
		// Quarantine notices (readers skip the seq they name) are the admin's.
		deny = append(deny, ledger.QuarantineSubject(s.Ledger))
		return &Permissions{
			Publish:   SubjectPermission{Allow: append(pub, read...), Deny: deny},
			Subscribe: sub,
		}, nil
	case RoleTooling:
		pub := []string{dlq, "$JS.API.STREAM.CREATE." + dlqStr, "$JS.API.CONSUMER.RESET." + stream + ".>", kvDelete(kvStr)}
		deny := append([]string{commits, "$KV.>", "$O.>", "$JS.API.STREAM.CREATE." + stream,
			"$JS.API.STREAM.CREATE." + kvStr, "$JS.API.STREAM.CREATE." + swStr, "$JS.API.STREAM.PURGE.>"}, noStreamChanges[:3]...)
		for _, c := range noConsumerChanges {
			if strings.HasPrefix(c, "$JS.API.CONSUMER.DELETE.") {
				deny = append(deny, c)
			}
		}
		return &Permissions{
			Publish:   SubjectPermission{Allow: append(pub, read...), Deny: deny},
			Subscribe: sub,
		}, nil
	}
	return nil, fmt.Errorf("permissions: unknown role %q: %w", role, ledger.ErrInvalid)
}

func validBucket(b string) bool {
	if b == "" || len(b) > 255 {
		return false
	}
	for _, c := range b {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

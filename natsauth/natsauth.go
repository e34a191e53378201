// Package natsauth defines the NATS subject permissions of syncledger's roles and
// renders them as a nats-server authorization block.
//
// A role's permissions are a list of grants (Grants): each a subject pattern
// the role may publish or subscribe to — or, denied, may never, whatever a
// wider allow added by hand says — with the resource it concerns and why.
// The list is the one source: For turns it into nats-server's allow and deny
// lists, Render into a configuration block, and documentation and the
// hostile-client tests can enumerate it row by row.
//
// A role's permissions are scoped to one ledger (Scope): its stream, its hosts'
// heartbeat bucket, its swamp bucket, its consumers' dead-letter stream and,
// when the ledger's blobs live in a NATS object store, that bucket; for the
// tooling role, also the durable consumers it runs (Scope.Consumers). NATS
// wildcards match whole subject tokens only ("SYNCLEDGER_*" is not a
// wildcard), so per-ledger lists are also the only way to name a ledger's
// streams without naming every stream.
//
// The roles:
//
//   - admin: no restriction. Makes and changes every resource of a ledger
//     (init, upgrade, serve, swamp setup of a namespace, consume create),
//     purges the stream (snapshot --retain-margin), collects blobs (gc),
//     forgets hosts, deletes consumers, quarantines a bad message (publishes
//     on syncledger.<ledger>.p.~q).
//   - host: what a projector host needs for sync, commit, watch, exec,
//     status, rebuild and the swamp agent: publish commits on
//     syncledger.<ledger>.p.> (not the admin's quarantine notices on .p.~q),
//     write blobs to the ledger's object store bucket (chunks and metadata),
//     put and delete keys of the heartbeat and swamp buckets, and read the
//     ledger's streams by stream info and direct and leader gets. Nothing
//     else: no stream or consumer of any kind is created, changed, purged or
//     deleted, and no consumer is read (the deny lists say so explicitly, so
//     a wider allow added by hand cannot grant it). What it may write cannot
//     remove what it does not own: the streams refuse roll-ups, message TTLs
//     and batches where none is needed (ledger/natsjs expect.go), and readers
//     keep an object's first metadata (ledger/natsblob).
//   - tooling: read-only monitoring and the consumers it runs (log, tail,
//     hosts, the dashboard, metrics, consume): stream info and gets on the
//     ledger's streams but the swamp bucket's (its control plane may hold
//     secrets), the list of the ledger's consumers, and on each durable
//     consumer named for it (Scope.Consumers) — which the admin creates —
//     fetch, acknowledge, info, the reset to its ack floor a restart does,
//     and its dead letters. No commits, blobs, keys, streams or consumers of
//     its own; never another consumer's messages or acknowledgements.
//
// Every role subscribes to the stream's republish of what it stored
// (syncledger.<ledger>.stored.>, what followers read: watch, log --follow,
// tail, the dashboard), and no role below admin publishes there (the deny
// lists name it): a message on it was stored by the stream, at the seq it
// states. No role below the admin subscribes to the ledger's publish
// subjects (syncledger.<ledger>.p.>): a publish there is seen by the server
// alone until the stream stores it, so no other user learns a message id or
// a batch id in flight (to pre-empt a commit, or to slip a message into its
// batch), nor sees a publish the stream refused.
//
// A host user may be scoped to the host ids it beats as (Scope.Hosts): it
// then writes those hosts' heartbeat keys only. Unscoped, it may write any
// key of the heartbeat bucket; readers skip a value under a key not its
// host's, but a well-formed beat of another host under that host's key
// passes for it (monitoring only: the bucket feeds hosts, the dashboard
// and the metrics, and nothing decides on it).
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

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// Version is the version of the permissions this package renders: a
// server whose users were given an older one (Marker) should have them
// rendered again. 2: nothing below the admin creates or changes a
// resource (issue 38). 3: no role below the admin subscribes to the
// ledger's publish subjects (syncledger.<ledger>.p.>: another writer's
// message ids and batch ids in flight), only to the stream's republish of
// what it stored and to serve's disk notices; a host user may be scoped to
// its own heartbeat key (Scope.Hosts).
const Version = 3

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
	// Consumers are the durable consumers of the ledger a tooling user runs
	// (consume audit --name NAME …): it may fetch, acknowledge, read and
	// reset those, and store their dead letters; none when empty. The
	// admin creates them (syncledger consume create). Other roles ignore it.
	Consumers []string
	// Hosts are the host ids (syncledger --host) a host user beats as: it
	// may write the heartbeat keys of these hosts only (heartbeat.Key), so
	// one host's credential cannot write another host's position. Every key
	// of the bucket when empty. Other roles ignore it.
	Hosts []string
}

// Verb is what a grant lets a user do with its subject.
type Verb string

// The verbs.
const (
	Publish   Verb = "publish"   // a message or a JetStream API request
	Subscribe Verb = "subscribe" // receive messages
)

// Grant is one line of a role's permissions: a subject pattern the role may
// publish or subscribe to, or — Deny — never may, whatever else allows it.
type Grant struct {
	Verb    Verb   `json:"verb"`
	Subject string `json:"subject"`
	Deny    bool   `json:"deny,omitempty"`
	// Resource is what it concerns, by the server's names: "stream
	// SYNCLEDGER_prod", "bucket SYNCLEDGER_HOSTS_prod", "consumer audit",
	// "any stream", "inboxes".
	Resource string `json:"resource"`
	// Why says what needs it, or what the refusal keeps.
	Why string `json:"why"`
}

// names are the server's names of what a scope covers.
type names struct {
	ledger, stream, commits       string
	hb, hbStream, swamp, swStream string
	dlqStream, bucket, objStream  string
	stored, server                string
	consumers, hosts              []string
}

func namesOf(s Scope) names {
	n := names{
		ledger:    s.Ledger,
		stream:    natsjs.StreamName(s.Ledger),
		commits:   ledger.SubjectPrefix(s.Ledger) + ">",
		stored:    natsjs.StoredSubjects(s.Ledger),
		server:    natsjs.ServerSubject(s.Ledger),
		hb:        natsjs.HeartbeatBucket(s.Ledger),
		swamp:     natsjs.SwampBucket(s.Ledger),
		dlqStream: natsjs.DeadLetterStream(s.Ledger),
		bucket:    s.ObjectBucket,
		consumers: s.Consumers,
		hosts:     s.Hosts,
	}
	n.hbStream, n.swStream = natsjs.KVStream(n.hb), natsjs.KVStream(n.swamp)
	if s.ObjectBucket != "" {
		n.objStream = natsblob.StreamName(s.ObjectBucket)
	}
	return n
}

// Marker is the subject of this Version that every role below the admin
// may publish to, and that nothing reads: a user the server refuses it has
// older permissions (those of a release before, rendered before this build:
// an allow list without it); status and swamp doctor probe it (Probes). The
// permissions of a version allow the markers of every version since 2, so
// that an older build finds a later one's permissions current.
func Marker() string { return markerOf(Version) }

func markerOf(v int) string { return fmt.Sprintf("_SYNCLEDGER.PERMISSIONS.V%d", v) }

// validate checks a scope.
func (s Scope) validate() error {
	if err := ledger.ValidateName(s.Ledger); err != nil {
		return fmt.Errorf("permissions: %w", err)
	}
	if s.ObjectBucket != "" && !validBucket(s.ObjectBucket) {
		return fmt.Errorf("permissions: object store bucket %q: want letters, digits, '-' and '_': %w", s.ObjectBucket, ledger.ErrInvalid)
	}
	hosts := map[string]bool{}
	for _, h := range s.Hosts {
		if h == "" || len(h) > ledger.MaxHostLen || hosts[heartbeat.Key(h)] {
			return fmt.Errorf("permissions: host id %q: want 1-%d bytes, once: %w", h, ledger.MaxHostLen, ledger.ErrInvalid)
		}
		hosts[heartbeat.Key(h)] = true
	}
	seen := map[string]bool{}
	for _, c := range s.Consumers {
		if !ledger.IsToken(c, 64) || seen[c] {
			return fmt.Errorf("permissions: consumer %q: want [A-Za-z0-9_-]{1,64}, once: %w", c, ledger.ErrInvalid)
		}
		seen[c] = true
	}
	return nil
}

// Grants returns role's grants in scope, allows first; none for the admin
// (no restriction).
func Grants(role Role, s Scope) ([]Grant, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	n := namesOf(s)
	switch role {
	case RoleAdmin:
		return nil, nil
	case RoleHost:
		return hostGrants(n), nil
	case RoleTooling:
		return toolingGrants(n), nil
	}
	return nil, fmt.Errorf("permissions: unknown role %q: %w", role, ledger.ErrInvalid)
}

// allow and deny make grants.
func allow(v Verb, subject, resource, why string) Grant {
	return Grant{Verb: v, Subject: subject, Resource: resource, Why: why}
}

func deny(subject, resource, why string) Grant {
	return Grant{Verb: Publish, Subject: subject, Deny: true, Resource: resource, Why: why}
}

// reads are the requests that read stream st: its info, and gets of its
// messages by seq or subject (direct, and from the leader).
func reads(st, why string) []Grant {
	res := "stream " + st
	return []Grant{
		allow(Publish, "$JS.API.STREAM.INFO."+st, res, why+": stream info"),
		allow(Publish, "$JS.API.STREAM.MSG.GET."+st, res, why+": a message from the leader"),
		allow(Publish, "$JS.API.DIRECT.GET."+st, res, why+": a message by seq (direct get)"),
		allow(Publish, "$JS.API.DIRECT.GET."+st+".>", res, why+": the last message of subjects (direct get)"),
	}
}

// common are every role's: answers, its account's JetStream info, and the
// ledger's own subjects to subscribe to.
func common(n names) []Grant {
	return append([]Grant{
		allow(Subscribe, "_INBOX.>", "inboxes", "the answers to its JetStream API requests and publishes"),
		allow(Subscribe, n.stored, "stream "+n.stream, "watch, log --follow, tail, the dashboard: the stream's republish of what it stored, read holding no consumer"),
		allow(Subscribe, n.server, "ledger "+n.ledger, "what serve says of its disk (a full disk, and when writes are taken again)"),
		allow(Publish, "$JS.API.INFO", "account", "JetStream's account info (nats.go asks it)"),
	}, markers()...)
}

// refusals are what no role below the admin may do, to any stream: every
// change of a stream or a consumer.
func refusals(n names) []Grant {
	const anyStream = "any stream"
	return []Grant{
		deny("$JS.API.STREAM.CREATE.>", anyStream, "streams and buckets are made by the admin only, with syncledger's settings (a bucket made first by someone else decides its keys' lifetime)"),
		deny("$JS.API.STREAM.UPDATE.>", anyStream, "a stream's settings are the admin's"),
		deny("$JS.API.STREAM.DELETE.>", anyStream, "deleting a stream is the admin's"),
		deny("$JS.API.STREAM.PURGE.>", anyStream, "purges are the admin's (retention, quarantine)"),
		deny("$JS.API.STREAM.MSG.DELETE.>", anyStream, "no message is deleted but by the admin's purge"),
		deny("$JS.API.STREAM.RESTORE.>", anyStream, "a restore makes a stream"),
		deny("$JS.API.STREAM.SNAPSHOT.>", anyStream, "a snapshot is a backup, the admin's"),
		deny("$JS.API.STREAM.PEER.>", anyStream, "cluster placement is the operator's"),
		deny("$JS.API.STREAM.LEADER.>", anyStream, "cluster placement is the operator's"),
		deny("$JS.API.CONSUMER.CREATE.>", "any consumer", "durable consumers are made by the admin only (consume create): a create on a running one is an update, and a thousand fill the server's limit"),
		deny("$JS.API.CONSUMER.DURABLE.CREATE.>", "any consumer", "durable consumers are made by the admin only"),
		deny("$JS.API.CONSUMER.DELETE.>", "any consumer", "deleting a consumer is the admin's (consume delete)"),
		deny("$JS.API.CONSUMER.PAUSE.>", "any consumer", "pausing a consumer is the admin's"),
		deny("$JS.API.CONSUMER.UNPIN.>", "any consumer", "pinning is the admin's"),
		deny("$JS.API.CONSUMER.LEADER.>", "any consumer", "cluster placement is the operator's"),
		deny("$JS.API.ACCOUNT.>", "account", "the account's streams are the admin's"),
		deny("$JS.API.META.>", "cluster", "the operator's"),
		deny("$JS.API.SERVER.>", "cluster", "the operator's"),
		deny(natsjs.StoredSubjects(n.ledger), "stream "+n.stream, "the stream's republish of what it stored is the server's: a follower takes what arrives there for stored"),
	}
}

// markers are the version markers this version's permissions allow.
func markers() []Grant {
	var g []Grant
	for v := 2; v <= Version; v++ {
		g = append(g, allow(Publish, markerOf(v), "permissions", fmt.Sprintf("marks permissions of version %d or later (nothing reads it): status and swamp doctor probe it", v)))
	}
	return g
}

func hostGrants(n names) []Grant {
	g := common(n)
	g = append(g,
		allow(Publish, n.commits, "stream "+n.stream, "commit: a commit's events"),
		allow(Publish, natsjs.KVSubjectPrefix+n.swamp+".>", "bucket "+n.swamp, "the swamp agent: take and release locks, the control plane, the namespace registry"),
	)
	if len(n.hosts) == 0 {
		g = append(g, allow(Publish, natsjs.KVSubjectPrefix+n.hb+".>", "bucket "+n.hb, "sync, watch: put its heartbeat — any host's key: give each host a user of its own, scoped to its host id (Scope.Hosts), so that it writes its own only"))
	}
	for _, h := range n.hosts {
		g = append(g, allow(Publish, natsjs.KVSubjectPrefix+n.hb+"."+heartbeat.Key(h), "bucket "+n.hb, fmt.Sprintf("sync, watch: put the heartbeat of host %s, its own (no other host's key)", h)))
	}
	if n.bucket != "" {
		g = append(g,
			allow(Publish, natsblob.ChunkSubjects(n.bucket), "stream "+n.objStream, "commit: a blob's chunks"),
			allow(Publish, natsblob.MetaSubjects(n.bucket), "stream "+n.objStream, "commit: a blob's metadata"),
		)
	}
	g = append(g, reads(n.stream, "sync, status, rebuild")...)
	g = append(g, reads(n.hbStream, "its heartbeat")...)
	g = append(g, reads(n.swStream, "the swamp agent (hosts only: the control plane may hold secrets)")...)
	if n.bucket != "" {
		g = append(g, reads(n.objStream, "sync: blobs")...)
	}
	g = append(g, refusals(n)...)
	g = append(g,
		deny("$JS.API.CONSUMER.>", "any consumer", "a host reads no consumer: sync reads by direct gets"),
		deny("$JS.ACK.>", "any consumer", "a host acknowledges for no consumer"),
		deny(ledger.QuarantineSubject(n.ledger), "stream "+n.stream, "quarantine notices (readers skip the seq they name) are the admin's"),
	)
	return g
}

func toolingGrants(n names) []Grant {
	g := common(n)
	g = append(g, reads(n.stream, "log, tail, the dashboard, consumers: the ledger")...)
	g = append(g, reads(n.hbStream, "hosts, the dashboard, metrics: the heartbeats")...)
	g = append(g, reads(n.dlqStream, "consume dead-letters, consume status")...)
	if n.bucket != "" {
		g = append(g, reads(n.objStream, "consumers: large commits' manifests")...)
	}
	g = append(g,
		allow(Publish, "$JS.API.CONSUMER.LIST."+n.stream, "stream "+n.stream, "consume status, the dashboard: the consumers' positions"),
		allow(Publish, "$JS.API.CONSUMER.NAMES."+n.stream, "stream "+n.stream, "consume status: the consumers' names"),
	)
	for _, c := range n.consumers {
		res := "consumer " + c
		g = append(g,
			allow(Publish, "$JS.API.CONSUMER.INFO."+n.stream+"."+c, res, "consume: its own consumer's position"),
			allow(Publish, "$JS.API.CONSUMER.MSG.NEXT."+n.stream+"."+c, res, "consume: fetch its own consumer's messages"),
			allow(Publish, "$JS.API.CONSUMER.RESET."+n.stream+"."+c, res, "consume: a restart resumes at its own consumer's ack floor"),
			allow(Publish, "$JS.ACK."+n.stream+"."+c+".>", res, "consume: acknowledge its own consumer's messages"),
			allow(Publish, natsjs.DeadLetterSubject(n.ledger, c), "stream "+n.dlqStream, "consume: its own consumer's dead letters"),
		)
	}
	g = append(g, refusals(n)...)
	g = append(g,
		deny(n.commits, "stream "+n.stream, "tooling publishes no commit"),
		deny("$KV.>", "any bucket", "tooling writes no key (the heartbeats are the hosts', the swamp bucket's keys swamp's)"),
		deny("$O.>", "any object store", "tooling writes no blob"),
	)
	return g
}

// For returns role's permissions in scope (Grants as nats-server's allow and
// deny lists); nil for admin (no restriction).
func For(role Role, s Scope) (*Permissions, error) {
	g, err := Grants(role, s)
	if err != nil || role == RoleAdmin {
		return nil, err
	}
	var p Permissions
	for _, x := range g {
		sp := &p.Publish
		if x.Verb == Subscribe {
			sp = &p.Subscribe
		}
		l := &sp.Allow
		if x.Deny {
			l = &sp.Deny
		}
		if !slices.Contains(*l, x.Subject) {
			*l = append(*l, x.Subject)
		}
	}
	return &p, nil
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

// Match reports whether the NATS subject pattern p matches subject, the
// server's way for a publish: tokens split on ".", "*" one token, a last ">"
// one or more; a wildcard in subject is matched as a literal token.
func Match(p, subject string) bool {
	pt, st := strings.Split(p, "."), strings.Split(subject, ".")
	for i, t := range pt {
		switch {
		case t == ">" && i == len(pt)-1:
			return len(st) > i
		case i >= len(st):
			return false
		case t != "*" && t != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// Allows reports whether the list lets its user publish to subject (or
// subscribe to it, a literal subject): some allow matches it and no deny
// does.
func (l SubjectPermission) Allows(subject string) bool {
	for _, d := range l.Deny {
		if Match(d, subject) {
			return false
		}
	}
	for _, a := range l.Allow {
		if Match(a, subject) {
			return true
		}
	}
	return false
}

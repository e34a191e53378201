package natsjs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
)

// What syncledger keeps on a server, each resource with the configuration it
// is created with and the settings a process checks when it opens it, in one
// place. Opening a resource whose settings differ fails with a
// *ledger.ConfigError naming the resource, the setting, what was found and
// wanted, and the admin command that makes it so — before the process trusts
// it with anything. Harden a setting here: creation and the check change
// together. The checks read the stream info that opening reads anyway (the
// ledger stream's STREAM.INFO; a bucket's, caught as nats.go's KeyValue reads
// it): no request of their own.
//
//	resource                       created by (today)                  checked by
//	the ledger's stream            init, serve, swamp setup (namespace) Ledger.Log, Create, Feed
//	the heartbeat bucket           the first host to beat or list      every open of it
//	the swamp bucket               the first swamp agent or setup      every open of it
//	the dead-letter stream         the first consumer                  Feed (its first dead letter, subscribe)
//	the object store bucket        init's probe, the first host        Client.ObjectStore
//
// Hosts create the buckets on first use (issue 38 moves creation to the
// admin); creation goes through the configurations below all the same. Where
// no command changes an existing resource yet, Repair names the one that
// creates it so.

// streamSettings is the part of a stream's configuration the checks read,
// under the server's names: a STREAM.INFO answer's "config" decodes into it.
type streamSettings struct {
	Subjects           []string          `json:"subjects"`
	Retention          string            `json:"retention"`
	MaxMsgs            int64             `json:"max_msgs"`
	MaxBytes           int64             `json:"max_bytes"`
	MaxAge             time.Duration     `json:"max_age"`
	MaxMsgsPerSubject  int64             `json:"max_msgs_per_subject"`
	Storage            string            `json:"storage"`
	Replicas           int               `json:"num_replicas"`
	Sealed             bool              `json:"sealed"`
	DenyDelete         bool              `json:"deny_delete"`
	DenyPurge          bool              `json:"deny_purge"`
	AllowRollup        bool              `json:"allow_rollup_hdrs"`
	AllowDirect        bool              `json:"allow_direct"`
	AllowAtomicPublish bool              `json:"allow_atomic"`
	AllowMsgTTL        bool              `json:"allow_msg_ttl"`
	Mirror             json.RawMessage   `json:"mirror,omitempty"`
	RePublish          *rePublish        `json:"republish,omitempty"`
	Metadata           map[string]string `json:"metadata"`
}

// rePublish is a stream's republish setting, under the server's names.
type rePublish struct {
	Source      string `json:"src"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only"`
}

// settingsOf returns c's settings as the server states them.
func settingsOf(c jetstream.StreamConfig) (*streamSettings, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var s streamSettings
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// expectation is one setting a resource must have.
type expectation struct {
	setting string // the server's name of it
	want    string
	found   func(*streamSettings) string
	holds   func(*streamSettings) bool
	repair  string // overrides the resource's Repair
}

// resource is a stream syncledger keeps: what it is, the settings it must
// have, and what makes it so.
type resource struct {
	what   string // "ledger \"x\" (stream SYNCLEDGER_x)"
	repair string
	expect []expectation
}

// check returns a *ledger.ConfigError for the first setting s lacks.
func (r resource) check(s *streamSettings) error {
	for _, e := range r.expect {
		if e.holds(s) {
			continue
		}
		repair := r.repair
		if e.repair != "" {
			repair = e.repair
		}
		return &ledger.ConfigError{Resource: r.what, Setting: e.setting, Found: e.found(s), Want: e.want, Repair: repair}
	}
	return nil
}

// checkConfig is check on a configuration as nats.go decodes it.
func (r resource) checkConfig(c jetstream.StreamConfig) error {
	s, err := settingsOf(c)
	if err != nil {
		return fmt.Errorf("%s: read its configuration: %w", r.what, err)
	}
	return r.check(s)
}

// The kinds of expectation.

func subjectsExactly(subjects ...string) expectation {
	want := slices.Clone(subjects)
	slices.Sort(want)
	return expectation{
		setting: "subjects", want: strings.Join(want, " "),
		found: func(s *streamSettings) string { return strings.Join(s.Subjects, " ") },
		holds: func(s *streamSettings) bool {
			got := slices.Clone(s.Subjects)
			slices.Sort(got)
			return slices.Equal(got, want)
		},
	}
}

func boolIs(setting string, want bool, get func(*streamSettings) bool) expectation {
	return expectation{
		setting: setting, want: fmt.Sprint(want),
		found: func(s *streamSettings) string { return fmt.Sprint(get(s)) },
		holds: func(s *streamSettings) bool { return get(s) == want },
	}
}

func text(setting, want string, get func(*streamSettings) string) expectation {
	return expectation{
		setting: setting, want: want, found: get,
		holds: func(s *streamSettings) bool { return get(s) == want },
	}
}

// unlimited: no limit (the server states none as -1; 0 means none too).
func unlimited(setting string, get func(*streamSettings) int64) expectation {
	return expectation{
		setting: setting, want: "no limit (-1)",
		found: func(s *streamSettings) string { return fmt.Sprint(get(s)) },
		holds: func(s *streamSettings) bool { return get(s) <= 0 },
	}
}

func exactly(setting string, want int64, get func(*streamSettings) int64) expectation {
	return expectation{
		setting: setting, want: fmt.Sprint(want),
		found: func(s *streamSettings) string { return fmt.Sprint(get(s)) },
		holds: func(s *streamSettings) bool { return get(s) == want },
	}
}

var noMirror = expectation{
	setting: "mirror", want: "none (a stream of its own)",
	found: func(s *streamSettings) string { return string(s.Mirror) },
	holds: func(s *streamSettings) bool { return len(s.Mirror) == 0 || string(s.Mirror) == "null" },
}

var notSealed = boolIs("sealed", false, func(s *streamSettings) bool { return s.Sealed })

var limitsRetention = text("retention", "limits", func(s *streamSettings) string { return s.Retention })

func noMaxAge(setting string) expectation {
	return expectation{
		setting: setting, want: "0 (kept until purged)",
		found: func(s *streamSettings) string { return s.MaxAge.String() },
		holds: func(s *streamSettings) bool { return s.MaxAge == 0 },
	}
}

// ledgerRePublish is the republish of a ledger's stream: the server sends
// each message it stores, once stored, headers and body, to
// syncledger.<ledger>.stored.<token> (StoredPrefix), with the headers it
// adds — Nats-Stream, Nats-Subject (the stored subject), Nats-Sequence (its
// seq), Nats-Time-Stamp and Nats-Last-Sequence (the seq of the previous
// message on the same subject: a partition's, its event's Prev). Followers
// subscribe there instead of holding a consumer (read.go Follow). Only the
// stream leader republishes, and a subscriber that is slow or reconnecting
// loses what was sent meanwhile: a follower checks the seqs for contiguity
// and reads what it missed by direct gets. Whole messages, not headers only:
// a follower then reads nothing per commit (the server sends one message to
// every follower), where headers only would cost every follower a direct get
// of every event.
//
// It is the one place the setting is spelled: Create makes a ledger with it,
// Open checks it (ledgerStream), and an admin's repair sets it on a ledger
// made without it (Ledger.RePublish).
func ledgerRePublish(name string) *jetstream.RePublish {
	return &jetstream.RePublish{Source: ledger.SubjectPrefix(name) + ">", Destination: StoredSubjects(name)}
}

// republishes: the stream republishes as ledgerRePublish says.
func republishes(name, repair string) expectation {
	want := ledgerRePublish(name)
	show := func(r *rePublish) string {
		if r == nil {
			return "none"
		}
		s := r.Source + " → " + r.Destination
		if r.HeadersOnly {
			s += " (headers only)"
		}
		return s
	}
	return expectation{
		setting: "republish",
		want:    show(&rePublish{Source: want.Source, Destination: want.Destination}),
		found:   func(s *streamSettings) string { return show(s.RePublish) },
		holds: func(s *streamSettings) bool {
			r := s.RePublish
			return r != nil && r.Source == want.Source && r.Destination == want.Destination && !r.HeadersOnly
		},
		repair: repair,
	}
}

// RePublishRepair is how a ledger made without its republish (before this
// release) gets it: an admin's init adds it to the existing stream
// (Ledger.RePublish), changing nothing else.
const RePublishRepair = "an admin's syncledger init adds it to the existing ledger (nothing else changes)"

// The resources.

// ledgerStream is a ledger's stream (Create's streamConfig). Its identity —
// the metadata, the format, the lineage — Log.adopt checks first. MaxAge is
// the ledger's own setting (LedgerConfig.MaxAge), and replicas are the
// operator's.
func ledgerStream(name string) resource {
	return resource{
		what:   fmt.Sprintf("ledger %q (stream %s)", name, ledger.StreamName(name)),
		repair: "syncledger init creates a ledger so; no command changes an existing stream yet",
		expect: []expectation{
			subjectsExactly(ledger.SubjectPrefix(name) + ">"),
			noMirror,
			notSealed,
			limitsRetention,
			unlimited("max_msgs", func(s *streamSettings) int64 { return s.MaxMsgs }),
			unlimited("max_bytes", func(s *streamSettings) int64 { return s.MaxBytes }),
			unlimited("max_msgs_per_subject", func(s *streamSettings) int64 { return s.MaxMsgsPerSubject }),
			boolIs("allow_atomic", true, func(s *streamSettings) bool { return s.AllowAtomicPublish }),
			boolIs("allow_direct", true, func(s *streamSettings) bool { return s.AllowDirect }),
			boolIs("deny_delete", true, func(s *streamSettings) bool { return s.DenyDelete }),
			boolIs("deny_purge", false, func(s *streamSettings) bool { return s.DenyPurge }), // retention and quarantine purge
			boolIs("allow_rollup_hdrs", false, func(s *streamSettings) bool { return s.AllowRollup }),
			boolIs("allow_msg_ttl", false, func(s *streamSettings) bool { return s.AllowMsgTTL }),
			republishes(name, RePublishRepair),
		},
	}
}

// kvConfig is the configuration a side bucket is created with: one value
// per key, on file, with the ledger stream's replicas.
func kvConfig(bucket, description string, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// kvBucket is a side bucket's stream, as nats.go makes it from kvConfig.
// Roll-ups are allowed: nats.go's key-value buckets are created so, and
// purging a key is a roll-up (issue 38 refuses them, and purges through the
// admin's API).
func kvBucket(ledgerName, bucket string) resource {
	repair := "the first host to use it creates it so; no command changes an existing bucket yet"
	switch bucket {
	case HeartbeatBucket(ledgerName):
		repair = "the first syncledger sync creates it so; no command changes an existing bucket yet"
	case SwampBucket(ledgerName):
		repair = "syncledger swamp setup creates it so; no command changes an existing bucket yet"
	}
	return resource{
		what:   fmt.Sprintf("bucket %s of ledger %q (stream %s)", bucket, ledgerName, KVStream(bucket)),
		repair: repair,
		expect: []expectation{
			subjectsExactly(KVSubjectPrefix + bucket + ".>"),
			noMirror,
			notSealed,
			limitsRetention,
			exactly("max_msgs_per_subject", 1, func(s *streamSettings) int64 { return s.MaxMsgsPerSubject }),
			unlimited("max_msgs", func(s *streamSettings) int64 { return s.MaxMsgs }),
			unlimited("max_bytes", func(s *streamSettings) int64 { return s.MaxBytes }),
			noMaxAge("max_age"),
			boolIs("allow_msg_ttl", false, func(s *streamSettings) bool { return s.AllowMsgTTL }),
			boolIs("deny_delete", true, func(s *streamSettings) bool { return s.DenyDelete }),
			boolIs("allow_direct", true, func(s *streamSettings) bool { return s.AllowDirect }), // List
		},
	}
}

// deadLetterConfig is the configuration of a ledger's dead-letter stream.
func deadLetterConfig(ledgerName string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        DeadLetterStream(ledgerName),
		Description: "syncledger dead letters of ledger " + ledgerName,
		Subjects:    []string{DeadLetterSubject(ledgerName, ">")},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		Duplicates:  DuplicateWindow,
		AllowDirect: true, // DeadLetters reads by direct gets (by leader gets where a stream made before does not allow them)
	}
}

// deadLetterStream is a ledger's dead-letter stream, as deadLetterConfig
// makes it: its subjects exactly (a stream binding others would capture
// them).
func deadLetterStream(ledgerName string) resource {
	return resource{
		what:   fmt.Sprintf("the dead letters of ledger %q (stream %s)", ledgerName, DeadLetterStream(ledgerName)),
		repair: "the first syncledger consume creates it so; no command changes an existing stream yet",
		expect: []expectation{
			subjectsExactly(DeadLetterSubject(ledgerName, ">")),
			noMirror,
			notSealed,
			limitsRetention,
			unlimited("max_msgs", func(s *streamSettings) int64 { return s.MaxMsgs }),
			unlimited("max_bytes", func(s *streamSettings) int64 { return s.MaxBytes }),
			noMaxAge("max_age"),
		},
	}
}

// objectStore is a nats:// blob store's bucket, as natsblob.StreamConfig
// makes it: written once. Its write-once settings an admin's syncledger init
// sets on a bucket made without them (natsblob's Harden).
func objectStore(bucket string) resource {
	const harden = "an admin's syncledger init makes the bucket write-once"
	rollup := boolIs("allow_rollup_hdrs", false, func(s *streamSettings) bool { return s.AllowRollup })
	rollup.repair = harden
	deny := boolIs("deny_delete", true, func(s *streamSettings) bool { return s.DenyDelete })
	deny.repair = harden
	return resource{
		what:   fmt.Sprintf("object store bucket %s (stream %s)", bucket, natsblob.StreamName(bucket)),
		repair: "syncledger init creates a bucket so; no command changes this setting of an existing one yet",
		expect: []expectation{
			subjectsExactly(natsblob.ChunkSubjects(bucket), natsblob.MetaSubjects(bucket)),
			noMirror,
			notSealed,
			limitsRetention,
			unlimited("max_msgs", func(s *streamSettings) int64 { return s.MaxMsgs }),
			unlimited("max_bytes", func(s *streamSettings) int64 { return s.MaxBytes }),
			unlimited("max_msgs_per_subject", func(s *streamSettings) int64 { return s.MaxMsgsPerSubject }),
			noMaxAge("max_age"),
			boolIs("allow_msg_ttl", false, func(s *streamSettings) bool { return s.AllowMsgTTL }),
			rollup,
			deny,
		},
	}
}
